//! The cluster suite has tests only: see `tests/`.
