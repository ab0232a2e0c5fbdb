//! The ledger file: arbitrary bytes as `ledger.redb`, opened, checked, read, exported;
//! a ledger found damaged takes no write. Invariants in
//! `reasoning_ledger::testing::fuzz::fuzz_ledger_file`. Seed it with a real ledger:
//! `mkdir -p fuzz/corpus/ledger_file && cp tests/fixtures/ledger-v2/ledger.redb fuzz/corpus/ledger_file/`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    reasoning_ledger::testing::fuzz::fuzz_ledger_file(data);
});
