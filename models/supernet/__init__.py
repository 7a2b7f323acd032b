"""One-shot order ranking: the supernet's config (torch-free), the weight-sharing model,
its training (``train``) and the ranking of orders under shared weights (``rank``)."""
