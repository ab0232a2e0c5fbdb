//! The import map, checked: every `crate::` path in `src/` (outside `src/bin` and test
//! modules) against the arrows `ARCHITECTURE.imports` allows, the way rust-analyzer keeps
//! its architecture invariants as tidy tests.
//!
//! Each file is parsed with `syn` (comments and doc links are not paths). A path names the
//! module it reaches through: `use crate::store::Ledger`, `crate::event::hash(..)`,
//! `super::super::store::...` resolved from the file's own module. Items under
//! `#[cfg(test)]` are skipped: a test may build what it checks from anywhere.
//!
//! The map's lines (see the file's own header):
//! - `a -> b c`: code under top-level module `a` may reach top-level modules `b` and `c`
//!   (and itself); a top-level module with no line may reach nothing.
//! - `a::b -/> a::c`: nothing under `a::b` reaches anything under `a::c`.
//!
//! The map must be exact: an arrow no path uses fails too, so the file always says what the
//! code does.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use syn::visit::Visit;

/// The map, next to ARCHITECTURE.md.
const MAP_FILE: &str = "ARCHITECTURE.imports";

/// The crate's source root; `src/bin` (the bench, another crate) is not the library's.
const SOURCE_ROOT: &str = "src";

/// Files that are roots of a binary, not modules of the library.
const BINARY_ROOTS: [&str; 1] = ["main.rs"];

/// One module's path inside the crate (`["store", "redb", "wal"]`).
type ModulePath = Vec<String>;

/// Where a reference was found, for the failure message: the file, and the first line
/// that names the module reached (syn's spans carry no lines outside a proc macro).
#[derive(Debug, Clone)]
struct Site {
    file: PathBuf,
    line: usize,
}

fn first_line_naming(text: &str, name: &str) -> usize {
    text.lines()
        .position(|line| !line.trim_start().starts_with("//") && line.contains(name))
        .map_or(1, |index| index + 1)
}

/// The parsed map.
#[derive(Default)]
struct Map {
    /// Top-level module → the top-level modules it may reach.
    allowed: BTreeMap<String, BTreeSet<String>>,
    /// (from, to) prefixes that must never meet.
    denied: Vec<(ModulePath, ModulePath)>,
}

fn split_path(text: &str) -> ModulePath {
    text.split("::").map(str::to_string).collect()
}

fn read_map(text: &str) -> Map {
    let mut map = Map::default();
    for (number, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap().trim();
        if line.is_empty() {
            continue;
        }
        if let Some((from, to)) = line.split_once("-/>") {
            map.denied
                .push((split_path(from.trim()), split_path(to.trim())));
        } else if let Some((from, to)) = line.split_once("->") {
            let from = from.trim().to_string();
            assert!(
                !from.contains("::"),
                "{MAP_FILE}:{}: `->` lines name top-level modules",
                number + 1
            );
            let targets = to.split_whitespace().map(str::to_string).collect();
            assert!(
                map.allowed.insert(from.clone(), targets).is_none(),
                "{MAP_FILE}:{}: `{from}` has two lines",
                number + 1
            );
        } else {
            panic!(
                "{MAP_FILE}:{}: neither `a -> b c` nor `a -/> b`",
                number + 1
            );
        }
    }
    map
}

/// The module a file is: `src/store/redb/mod.rs` → `store::redb`, `src/event.rs` → `event`.
fn module_of(file: &Path) -> ModulePath {
    let relative = file.strip_prefix(SOURCE_ROOT).unwrap();
    let mut parts: ModulePath = relative
        .iter()
        .map(|part| part.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.strip_suffix(".rs").unwrap();
    if stem != "mod" && stem != "lib" {
        parts.push(stem.to_string());
    }
    parts
}

fn source_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            if path != Path::new(SOURCE_ROOT).join("bin") {
                source_files(&path, out);
            }
        } else if path.extension().is_some_and(|ext| ext == "rs")
            && !(path.parent() == Some(Path::new(SOURCE_ROOT))
                && BINARY_ROOTS.iter().any(|root| path.ends_with(root)))
        {
            out.push(path);
        }
    }
}

fn is_test_only(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|attr| {
        attr.path().is_ident("cfg")
            && attr
                .meta
                .require_list()
                .map(|list| list.tokens.to_string() == "test")
                .unwrap_or(false)
    })
}

/// Collects every `crate::`/`super::` path of one file, resolved to the module it names.
struct Collector<'l> {
    /// The module the code being visited is in (grows with inline `mod x { }`).
    module: ModulePath,
    /// The crate's top-level modules: in the root, `store::x` names one without `crate::`.
    top_level: &'l BTreeSet<String>,
    found: Vec<(ModulePath, ModulePath)>,
}

impl Collector<'_> {
    /// `segments` as written; returns the absolute module path it reaches, if it is one
    /// of the crate's (`crate::`, `super::`, `self::`).
    fn resolve(&self, segments: &[String]) -> Option<ModulePath> {
        let first = segments.first()?;
        let (mut base, rest): (ModulePath, &[String]) = match first.as_str() {
            "crate" => (Vec::new(), &segments[1..]),
            "super" => {
                let mut base = self.module.clone();
                let mut rest = segments;
                while rest.first().is_some_and(|s| s == "super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            }
            "self" => (self.module.clone(), &segments[1..]),
            name if self.module.is_empty() && self.top_level.contains(name) => {
                (Vec::new(), segments)
            }
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn record(&mut self, segments: &[String]) {
        if let Some(target) = self.resolve(segments)
            && !target.is_empty()
        {
            self.found.push((self.module.clone(), target));
        }
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(path) => {
                prefix.push(path.ident.to_string());
                self.use_tree(prefix, &path.tree);
                prefix.pop();
            }
            syn::UseTree::Name(name) => {
                prefix.push(name.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.record(prefix);
                prefix.pop();
            }
            syn::UseTree::Glob(_) => {
                self.record(prefix);
            }
            syn::UseTree::Group(group) => {
                for item in &group.items {
                    self.use_tree(prefix, item);
                }
            }
        }
    }
}

impl<'ast> Visit<'ast> for Collector<'_> {
    fn visit_item(&mut self, item: &'ast syn::Item) {
        let attrs: &[syn::Attribute] = match item {
            syn::Item::Const(i) => &i.attrs,
            syn::Item::Enum(i) => &i.attrs,
            syn::Item::Fn(i) => &i.attrs,
            syn::Item::Impl(i) => &i.attrs,
            syn::Item::Mod(i) => &i.attrs,
            syn::Item::Static(i) => &i.attrs,
            syn::Item::Struct(i) => &i.attrs,
            syn::Item::Trait(i) => &i.attrs,
            syn::Item::Type(i) => &i.attrs,
            syn::Item::Use(i) => &i.attrs,
            syn::Item::Macro(i) => &i.attrs,
            _ => &[],
        };
        if is_test_only(attrs) {
            return;
        }
        syn::visit::visit_item(self, item);
    }

    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        if item.content.is_some() {
            self.module.push(item.ident.to_string());
            syn::visit::visit_item_mod(self, item);
            self.module.pop();
        }
    }

    fn visit_item_use(&mut self, item: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &item.tree);
    }

    fn visit_path(&mut self, path: &'ast syn::Path) {
        let segments: Vec<String> = path
            .segments
            .iter()
            .map(|segment| segment.ident.to_string())
            .collect();
        self.record(&segments);
        syn::visit::visit_path(self, path);
    }
}

/// What the first pass learns from every file: the modules declared `#[cfg(test)] mod x;`
/// (their files are test code), the crate's top-level modules, and where each
/// `#[macro_export]` macro lives (it is reached as `crate::name!` from the root).
#[derive(Default)]
struct Layout {
    test_only: Vec<ModulePath>,
    top_level: BTreeSet<String>,
    macros: BTreeMap<String, ModulePath>,
}

struct LayoutPass<'l> {
    module: ModulePath,
    layout: &'l mut Layout,
}

impl<'ast> Visit<'ast> for LayoutPass<'_> {
    fn visit_item_mod(&mut self, item: &'ast syn::ItemMod) {
        let mut path = self.module.clone();
        path.push(item.ident.to_string());
        if path.len() == 1 {
            self.layout.top_level.insert(path[0].clone());
        }
        if is_test_only(&item.attrs) {
            self.layout.test_only.push(path);
        } else if item.content.is_some() {
            std::mem::swap(&mut self.module, &mut path);
            syn::visit::visit_item_mod(self, item);
            std::mem::swap(&mut self.module, &mut path);
        }
    }

    fn visit_item_macro(&mut self, item: &'ast syn::ItemMacro) {
        let exported = item
            .attrs
            .iter()
            .any(|attr| attr.path().is_ident("macro_export"));
        if let (true, Some(name)) = (exported, &item.ident) {
            self.layout
                .macros
                .insert(name.to_string(), self.module.clone());
        }
    }
}

/// The pseudo-module of items in the crate's root (`lib.rs`).
const ROOT: &str = "lib";

/// Every reference from one module to another in the crate: (from, to) → first site. Both
/// sides are module paths whose first segment is a top-level module or [`ROOT`].
fn references() -> BTreeMap<(ModulePath, ModulePath), Site> {
    let mut files = Vec::new();
    source_files(Path::new(SOURCE_ROOT), &mut files);
    files.sort();
    let parsed: Vec<(PathBuf, String, syn::File)> = files
        .into_iter()
        .map(|file| {
            let text = std::fs::read_to_string(&file).unwrap();
            let parsed = syn::parse_file(&text)
                .unwrap_or_else(|error| panic!("{}: {error}", file.display()));
            (file, text, parsed)
        })
        .collect();
    let mut layout = Layout::default();
    for (file, _, syntax) in &parsed {
        LayoutPass {
            module: module_of(file),
            layout: &mut layout,
        }
        .visit_file(syntax);
    }
    let rooted = |mut path: ModulePath| -> ModulePath {
        if let Some(home) = path.first().and_then(|name| layout.macros.get(name)) {
            let mut at = home.clone();
            at.append(&mut path);
            path = at;
        }
        if path
            .first()
            .is_none_or(|name| !layout.top_level.contains(name))
        {
            path.insert(0, ROOT.to_string());
        }
        path
    };
    let mut out = BTreeMap::new();
    for (file, text, syntax) in &parsed {
        let module = module_of(file);
        if layout.test_only.iter().any(|test| module.starts_with(test)) {
            continue;
        }
        let mut collector = Collector {
            module,
            top_level: &layout.top_level,
            found: Vec::new(),
        };
        collector.visit_file(syntax);
        for (from, to) in collector.found {
            let line = first_line_naming(text, to.last().unwrap());
            out.entry((rooted(from), rooted(to))).or_insert(Site {
                file: file.clone(),
                line,
            });
        }
    }
    out
}

#[test]
fn imports_follow_the_map() {
    let map = read_map(&std::fs::read_to_string(MAP_FILE).unwrap());
    let references = references();
    let mut wrong = String::new();
    // (from, to) top-level arrow → its first site and how many paths take it.
    let mut arrows: BTreeMap<(String, String), (Site, ModulePath, ModulePath, usize)> =
        BTreeMap::new();
    for ((from, to), site) in &references {
        if from[0] != to[0] {
            arrows
                .entry((from[0].clone(), to[0].clone()))
                .or_insert_with(|| (site.clone(), from.clone(), to.clone(), 0))
                .3 += 1;
        }
        for (denied_from, denied_to) in &map.denied {
            if from.starts_with(denied_from) && to.starts_with(denied_to) {
                let _ = writeln!(
                    wrong,
                    "{}:{}: `{}` reaches `crate::{}`: {MAP_FILE} says {} -/> {}",
                    site.file.display(),
                    site.line,
                    from.join("::"),
                    to.join("::"),
                    denied_from.join("::"),
                    denied_to.join("::"),
                );
            }
        }
    }
    for ((from_top, to_top), (site, from, to, count)) in &arrows {
        if !map
            .allowed
            .get(from_top)
            .is_some_and(|targets| targets.contains(to_top))
        {
            let _ = writeln!(
                wrong,
                "{}:{}: `{}` reaches `crate::{}` ({count} paths from {from_top} to {to_top}): \
                 {MAP_FILE} has no arrow {from_top} -> {to_top}",
                site.file.display(),
                site.line,
                from.join("::"),
                to.join("::"),
            );
        }
    }
    for (from, targets) in &map.allowed {
        for to in targets {
            if !arrows.contains_key(&(from.clone(), to.clone())) {
                let _ = writeln!(
                    wrong,
                    "{MAP_FILE}: no code under `{from}` reaches `{to}`: remove the arrow"
                );
            }
        }
    }
    if !wrong.is_empty() {
        let mut actual: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
        for (from, to) in arrows.keys() {
            actual.entry(from).or_default().push(to);
        }
        let _ = writeln!(wrong, "\nthe arrows the code has:");
        for (from, targets) in actual {
            let _ = writeln!(wrong, "{from} -> {}", targets.join(" "));
        }
        panic!("the import map does not hold:\n{wrong}");
    }
}

/// The check itself: a path through `super::` resolves from the file's module, a
/// test-only item is skipped, and a comment is not a path.
#[test]
fn the_collector_resolves_paths_and_skips_tests() {
    let file = syn::parse_file(
        "use super::super::store::Ledger;\n\
         // crate::cli::nothing\n\
         fn f() { crate::event::hash(); }\n\
         #[cfg(test)] mod tests { use crate::tools::x; }\n\
         mod inner { use super::sibling; }\n",
    )
    .unwrap();
    let top_level = BTreeSet::from(["store".to_string(), "event".to_string()]);
    let mut collector = Collector {
        module: vec!["recall".into(), "index".into()],
        top_level: &top_level,
        found: Vec::new(),
    };
    collector.visit_file(&file);
    let found: Vec<String> = collector
        .found
        .iter()
        .map(|(from, to)| format!("{} -> {}", from.join("::"), to.join("::")))
        .collect();
    assert_eq!(
        found,
        [
            "recall::index -> store::Ledger",
            "recall::index -> event::hash",
            "recall::index::inner -> recall::index::sibling",
        ]
    );
}
