//! exports (being written)
