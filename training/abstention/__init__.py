"""The abstention classifier: does an answer decline to answer? Training (`train`) and its CLI."""
