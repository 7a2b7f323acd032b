"""Reports: which studies a sweep or a paper gets (``build``), their sections, and the HTML
and Markdown writer (``writer``)."""
