//! bad_input (being written)
