"""The paper's photo curation: a quality classifier, a CLIP fragment filter and best-view selection, streamed over
any number of photos with a resumable manifest and a retention report (``python -m vase.filter``)."""
