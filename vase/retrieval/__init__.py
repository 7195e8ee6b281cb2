"""Retrieval-augmented prompts: an index of the training vases (CLIP image embeddings of their views, their
six-dimension metadata and captions) whose nearest neighbours' metadata go into the prompt (``retrieval.k``)."""
