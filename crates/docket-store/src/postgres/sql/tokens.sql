-- API tokens: only their SHA-256 is kept.

