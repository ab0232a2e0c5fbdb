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
//!
//! The same paths, followed through the `use`s that re-export them to the file that
//! defines what they name, make a graph of files; no two files may import each other,
//! directly or around a loop (its strongly connected components, by petgraph), but the
//! loops [`LOOPS_LEFT`] names. A file reaching its own folder's `mod.rs` (or `lib.rs`) is
//! not an edge: a folder's front declares its files and lends them what they share.
//! Arguments of macros that parse as expressions (`format!`, `assert!`) are read too.

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
    /// Every module of the crate: `wal::Record` in `store::redb` names its child `wal`.
    modules: &'l BTreeSet<ModulePath>,
    found: Vec<(ModulePath, ModulePath)>,
    /// What each `use` names in its module: (module, name) → the path it stands for.
    aliases: BTreeMap<(ModulePath, String), ModulePath>,
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
            name if segments.len() > 1 && self.is_child(name) => (self.module.clone(), segments),
            _ => return None,
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    fn is_child(&self, name: &str) -> bool {
        let mut child = self.module.clone();
        child.push(name.to_string());
        self.modules.contains(&child)
    }

    /// `use a::b::c as d` (`use a::b::{self as d}`): `d` in this module stands for `a::b::c`.
    fn alias(&mut self, segments: &[String], name: &str) {
        let segments = segments
            .strip_suffix(&["self".to_string()])
            .unwrap_or(segments);
        if let Some(target) = self.resolve(segments)
            && !target.is_empty()
        {
            self.aliases
                .insert((self.module.clone(), name.to_string()), target);
        }
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
                let ident = name.ident.to_string();
                let as_name = if ident == "self" {
                    prefix.last().cloned().unwrap_or_default()
                } else {
                    ident.clone()
                };
                prefix.push(ident);
                self.record(prefix);
                self.alias(prefix, &as_name);
                prefix.pop();
            }
            syn::UseTree::Rename(rename) => {
                prefix.push(rename.ident.to_string());
                self.record(prefix);
                self.alias(prefix, &rename.rename.to_string());
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

    /// A macro's arguments are tokens, not syntax: `format!("{}", crate::cli::X)` names
    /// `cli` all the same, so arguments that parse as expressions (`format!`, `assert!`,
    /// `vec!`, ..) are visited as such.
    fn visit_macro(&mut self, mac: &'ast syn::Macro) {
        syn::visit::visit_macro(self, mac);
        let parser = syn::punctuated::Punctuated::<syn::Expr, syn::Token![,]>::parse_terminated;
        if let Ok(arguments) = mac.parse_body_with(parser) {
            for argument in &arguments {
                self.visit_expr(argument);
            }
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
    /// Every module outside tests, in its own file or inline (the crate root is `[]`).
    modules: BTreeSet<ModulePath>,
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
            return;
        }
        self.layout.modules.insert(path.clone());
        if item.content.is_some() {
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

/// One file of the crate, read: its module, its text, and the paths it names (from the
/// module, maybe inline, that names it → the path resolved from there).
struct SourceFile {
    file: PathBuf,
    module: ModulePath,
    text: String,
    found: Vec<(ModulePath, ModulePath)>,
}

/// The crate's files outside tests, and what every `use` makes a name stand for.
struct Sources {
    layout: Layout,
    files: Vec<SourceFile>,
    aliases: BTreeMap<(ModulePath, String), ModulePath>,
}

fn read_sources() -> Sources {
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
    layout.modules.insert(Vec::new());
    for (file, _, syntax) in &parsed {
        LayoutPass {
            module: module_of(file),
            layout: &mut layout,
        }
        .visit_file(syntax);
    }
    let mut out = Vec::new();
    let mut aliases = BTreeMap::new();
    for (file, text, syntax) in parsed {
        let module = module_of(&file);
        if layout.test_only.iter().any(|test| module.starts_with(test)) {
            continue;
        }
        let mut collector = Collector {
            module: module.clone(),
            top_level: &layout.top_level,
            modules: &layout.modules,
            found: Vec::new(),
            aliases: BTreeMap::new(),
        };
        collector.visit_file(&syntax);
        aliases.append(&mut collector.aliases);
        out.push(SourceFile {
            file,
            module,
            text,
            found: collector.found,
        });
    }
    Sources {
        layout,
        files: out,
        aliases,
    }
}

/// Every reference from one module to another in the crate: (from, to) → first site. Both
/// sides are module paths whose first segment is a top-level module or [`ROOT`].
fn references() -> BTreeMap<(ModulePath, ModulePath), Site> {
    let sources = read_sources();
    let layout = &sources.layout;
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
    for source in &sources.files {
        for (from, to) in &source.found {
            let line = first_line_naming(&source.text, to.last().unwrap());
            out.entry((rooted(from.clone()), rooted(to.clone())))
                .or_insert(Site {
                    file: source.file.clone(),
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

/// Loops between files left on purpose, each a file's module (`lib` for the crate root):
/// a loop of exactly these files passes, any other fails.
const LOOPS_LEFT: &[&[&str]] = &[
    // A family's prompt implements prompts' trait (`FamilyPrompt`), and prompts lists the
    // families through `tools::FAMILIES`: it goes with the families handed in as a value
    // (issue 47, part 1), not file by file.
    &[
        "prompts",
        "tools",
        "tools::planning",
        "tools::planning::plan_prompt",
    ],
];

/// The file a path is in: what its `use`s stand for followed (`crate::store::StoreError` is
/// `store::error`'s, re-exported by `store/mod.rs`), then the file of the innermost module
/// it names (an inline module is its file's).
fn file_of(sources: &Sources, path: &[String]) -> ModulePath {
    let layout = &sources.layout;
    let mut path: ModulePath = path.to_vec();
    if let Some(home) = path.first().and_then(|name| layout.macros.get(name)) {
        let mut at = home.clone();
        at.append(&mut path);
        path = at;
    }
    let mut module_len = 0;
    for _ in 0..32 {
        module_len = (0..=path.len())
            .rev()
            .find(|&len| layout.modules.contains(&path[..len]))
            .unwrap_or(0);
        let Some(name) = path.get(module_len) else {
            break;
        };
        match sources
            .aliases
            .get(&(path[..module_len].to_vec(), name.clone()))
        {
            Some(target) if !path.starts_with(target) || target.len() > module_len + 1 => {
                let mut next = target.clone();
                next.extend(path[module_len + 1..].iter().cloned());
                path = next;
            }
            _ => break,
        }
    }
    let files: BTreeSet<&ModulePath> = sources.files.iter().map(|f| &f.module).collect();
    (0..=module_len)
        .rev()
        .map(|len| path[..len].to_vec())
        .find(|prefix| files.contains(prefix))
        .unwrap_or_default()
}

fn file_name(module: &[String]) -> String {
    if module.is_empty() {
        ROOT.to_string()
    } else {
        module.join("::")
    }
}

/// The files' graph: file → the files it reaches → the first site. A file reaching its own
/// folder's `mod.rs` (or `lib.rs`) is not an edge: a folder's front declares its files and
/// lends them what they share; a loop through it is the folder's, not between files.
fn file_graph() -> BTreeMap<ModulePath, BTreeMap<ModulePath, Site>> {
    let sources = read_sources();
    let mut graph: BTreeMap<ModulePath, BTreeMap<ModulePath, Site>> = BTreeMap::new();
    for source in &sources.files {
        graph.entry(source.module.clone()).or_default();
        for (_, to) in &source.found {
            let target = file_of(&sources, to);
            if source.module.starts_with(&target) {
                continue;
            }
            let line = first_line_naming(&source.text, to.last().unwrap());
            graph
                .entry(source.module.clone())
                .or_default()
                .entry(target)
                .or_insert(Site {
                    file: source.file.clone(),
                    line,
                });
        }
    }
    graph
}

/// The loops between files (strongly connected components of more than one file), each
/// sorted, with the edges that close them.
fn file_loops() -> Vec<(Vec<String>, String)> {
    let graph = file_graph();
    let mut petgraph = petgraph::graph::DiGraph::<&ModulePath, ()>::new();
    let nodes: BTreeMap<&ModulePath, _> = graph
        .keys()
        .chain(graph.values().flat_map(BTreeMap::keys))
        .map(|module| (module, ()))
        .collect::<BTreeMap<_, _>>()
        .into_keys()
        .map(|module| (module, petgraph.add_node(module)))
        .collect();
    for (from, targets) in &graph {
        for to in targets.keys() {
            petgraph.add_edge(nodes[from], nodes[to], ());
        }
    }
    let mut loops: Vec<(Vec<String>, String)> = petgraph::algo::tarjan_scc(&petgraph)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let members: BTreeSet<&ModulePath> =
                component.iter().map(|&node| petgraph[node]).collect();
            let mut edges = String::new();
            for from in &members {
                for (to, site) in &graph[*from] {
                    if members.contains(to) {
                        let _ = writeln!(
                            edges,
                            "    {} -> {}  ({}:{})",
                            file_name(from),
                            file_name(to),
                            site.file.display(),
                            site.line
                        );
                    }
                }
            }
            (members.iter().map(|m| file_name(m)).collect(), edges)
        })
        .collect();
    loops.sort();
    loops
}

/// No two files import each other, directly or around a loop (but [`LOOPS_LEFT`]): a file
/// in a loop cannot be read, tested or moved alone.
#[test]
fn files_import_each_other_in_no_loop() {
    let loops = file_loops();
    let mut wrong = String::new();
    let mut left = String::new();
    for (members, edges) in &loops {
        let allowed = LOOPS_LEFT.iter().any(|allowed| {
            let allowed: BTreeSet<&str> = allowed.iter().copied().collect();
            allowed == members.iter().map(String::as_str).collect()
        });
        let out = if allowed { &mut left } else { &mut wrong };
        let _ = writeln!(out, "  {}\n{edges}", members.join(" <-> "));
    }
    eprintln!("loops left on purpose ({}):\n{left}", LOOPS_LEFT.len());
    for allowed in LOOPS_LEFT {
        let allowed: BTreeSet<&str> = allowed.iter().copied().collect();
        if !loops.iter().any(|(members, _)| {
            members.iter().map(String::as_str).collect::<BTreeSet<_>>() == allowed
        }) {
            let _ = writeln!(
                wrong,
                "  LOOPS_LEFT names a loop the code does not have: {allowed:?}"
            );
        }
    }
    assert!(
        wrong.is_empty(),
        "files that import each other in a loop:\n{wrong}"
    );
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
    let modules = BTreeSet::new();
    let mut collector = Collector {
        module: vec!["recall".into(), "index".into()],
        top_level: &top_level,
        modules: &modules,
        found: Vec::new(),
        aliases: BTreeMap::new(),
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
