"""Released checkpoints from the Hugging Face hub: fetching by byte range, revisions, download plans."""
