//! The Mermaid escaper and renderer: arbitrary bytes as one label, then as a thought tree
//! (kinds, references and texts chosen by the bytes). Invariants in
//! `reasoning_ledger::testing::fuzz::check_label` and `check_render`.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    reasoning_ledger::testing::fuzz::fuzz_mermaid(data);
});
