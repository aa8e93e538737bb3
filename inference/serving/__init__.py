"""The HTTP service (`autovalidators serve`), its Python client and the load check."""
