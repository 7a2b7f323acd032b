"""The papers' published numbers as frames: Press et al. 2020 (``press_paper``), Crossformer
(``crossformer_paper``) and IOT (``iot_paper``)."""
