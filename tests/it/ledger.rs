//! ledger (being written)
