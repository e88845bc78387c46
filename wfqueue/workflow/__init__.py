"""What every workflow (collab, lite, workflow session) shares: the coordinator skeleton
(``base``), what a workflow kind declares (``kind``) and the list of kinds (``registry``)."""
