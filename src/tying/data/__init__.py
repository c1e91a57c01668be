"""Corpus, tokenizer, token arrays, training batches and the token sets analyses run on."""
