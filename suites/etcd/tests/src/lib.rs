//! The etcd suite has tests only: see `tests/`.
