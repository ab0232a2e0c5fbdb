//! durability (being written)
