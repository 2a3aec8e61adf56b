"""Look inside a BERT model: sentence vectors, a vector index, attention maps and pictures."""
