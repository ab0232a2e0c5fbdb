//! Links the optimised `reasoning-ledger` binary (profiles `dist` and `release`) with its
//! hot code first.
//!
//! A stdio server runs a small part of its 15 MB of code, but that part is spread over
//! the whole text segment, and Linux maps the pages *around* each page a process touches
//! (fault-around, 64 KiB): the touched code cost three times its size in VmRSS.
//! `tools/layout/hot-symbols.txt` lists, in order of first execution, the functions a
//! stdio session runs (written by `tools/layout/trace`, from a run under valgrind of the
//! release binary); lld's `--symbol-ordering-file` places them at the start of `.text`.
//!
//! Only on x86_64-unknown-linux-gnu release builds with rustc ≥ 1.90 (whose default linker
//! there is the bundled `rust-lld`), and only when no other linker is configured: the GNU
//! linker does not know the flag. A stale list (a function renamed, another toolchain: the
//! mangled names carry hashes) costs nothing but the gain (`--no-warn-symbol-ordering`).
//! `REASONING_LEDGER_LINK_MAP=FILE` also writes lld's map (addresses → symbols), which
//! `tools/layout/trace` reads. This script must not change what the code does.

use std::env;
use std::path::Path;
use std::process::Command;

/// The list of hot functions, relative to the package root.
const HOT_SYMBOLS: &str = "tools/layout/hot-symbols.txt";

/// The first rustc whose default linker on x86_64-unknown-linux-gnu is `rust-lld`.
const FIRST_RUSTC_WITH_LLD: (u32, u32) = (1, 90);

fn main() {
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={HOT_SYMBOLS}");
    println!("cargo:rerun-if-env-changed=REASONING_LEDGER_LINK_MAP");
    println!("cargo:rerun-if-env-changed=REASONING_LEDGER_NO_LAYOUT");
    if !links_with_bundled_lld() || env::var_os("REASONING_LEDGER_NO_LAYOUT").is_some() {
        return;
    }
    let root = env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let hot = Path::new(&root).join(HOT_SYMBOLS);
    if hot.is_file() {
        println!(
            "cargo:rustc-link-arg-bin=reasoning-ledger=-Wl,--symbol-ordering-file={}",
            hot.display()
        );
        println!("cargo:rustc-link-arg-bin=reasoning-ledger=-Wl,--no-warn-symbol-ordering");
    }
    if let Some(map) = env::var_os("REASONING_LEDGER_LINK_MAP") {
        println!(
            "cargo:rustc-link-arg-bin=reasoning-ledger=-Wl,-Map={}",
            Path::new(&map).display()
        );
        // The map names symbols as the ordering file must: mangled.
        println!("cargo:rustc-link-arg-bin=reasoning-ledger=-Wl,--no-demangle");
    }
}

/// Whether the binary is linked by the toolchain's own `rust-lld` (see the module doc).
fn links_with_bundled_lld() -> bool {
    let var = |name: &str| env::var(name).unwrap_or_default();
    if var("PROFILE") != "release" || var("TARGET") != "x86_64-unknown-linux-gnu" {
        return false;
    }
    // A linker set in cargo's configuration or in the flags: not ours to second-guess.
    if env::var_os("RUSTC_LINKER").is_some() {
        return false;
    }
    let flags = var("CARGO_ENCODED_RUSTFLAGS");
    if ["linker", "fuse-ld", "link-self-contained"]
        .iter()
        .any(|word| flags.contains(word))
    {
        return false;
    }
    let rustc = env::var_os("RUSTC").unwrap_or_else(|| "rustc".into());
    let Ok(output) = Command::new(rustc).arg("--version").output() else {
        return false;
    };
    // "rustc 1.95.0 (59807616e 2026-04-14)"
    let text = String::from_utf8_lossy(&output.stdout);
    let mut numbers = text
        .split_whitespace()
        .nth(1)
        .unwrap_or_default()
        .split(['.', '-'])
        .map(|part| part.parse::<u32>().ok());
    match (numbers.next().flatten(), numbers.next().flatten()) {
        (Some(major), Some(minor)) => (major, minor) >= FIRST_RUSTC_WITH_LLD,
        _ => false,
    }
}
