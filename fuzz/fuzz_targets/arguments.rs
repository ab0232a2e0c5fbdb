//! Argument decoding: arbitrary bytes as a tool's arguments (a JSON object, or fields
//! the bytes choose) through the coercion policy, both thinking tools' `parse` and their
//! `decide_*`. Invariants in `reasoning_ledger::testing::fuzz::check_arguments`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    reasoning_ledger::testing::fuzz::fuzz_arguments(data);
});
