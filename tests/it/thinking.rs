//! thinking (being written)
