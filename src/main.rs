//! The `reasoning-ledger` binary: everything lives in the library; see `cli`.

fn main() -> std::process::ExitCode {
    reasoning_ledger::main()
}
