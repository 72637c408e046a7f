//! A crate's module layering, read from its sources: which top-level modules refer to which, the
//! circles among them ([`cycles`], [`cycle_report`]), and the files grown past a size
//! ([`long_files`]). For tests that keep a crate layered (issue 35: `crates/measure/tests/
//! layers.rs`): every module imports only the ones below it.
//!
//! The granularity is the top-level module: `src/runner/epoch.rs` is `runner`, and the files of
//! one directory module may refer to each other and to their parent freely. A reference is a
//! path `crate::a::...` (also inside `use crate::{a::X, b}`), or `super::a` from a top-level
//! file; a name the crate root re-exports (`pub use a::X;` in `lib.rs`, then `crate::X`) counts
//! as a reference to the module it comes from. Comments are skipped (a doc link is not an
//! import). This is a reading of the text, not of the compiler's name resolution: a path built
//! by a macro is not seen.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The references between the top-level modules of the crate whose sources are `src_dir`:
/// per module, per module it refers to, the places (`file: path`) that do.
pub type Edges = BTreeMap<String, BTreeMap<String, Vec<String>>>;

/// Every `.rs` file under `dir`, sorted.
fn rs_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![];
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let rd = std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display()));
        for entry in rd {
            let p = entry
                .unwrap_or_else(|e| panic!("{}: {e}", d.display()))
                .path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push(p);
            }
        }
    }
    out.sort();
    out
}

/// The top-level module a file belongs to (`None`: the crate root, `lib.rs` or `main.rs`).
fn top_module(src_dir: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src_dir).unwrap_or(file);
    let mut parts = rel.components();
    let first = parts.next()?.as_os_str().to_string_lossy().into_owned();
    if parts.next().is_some() {
        return Some(first);
    }
    let stem = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (stem != "lib" && stem != "main").then_some(stem)
}

/// The text without its `//` comments (doc comments included).
fn code_of(text: &str) -> String {
    text.lines()
        .map(|l| l.find("//").map_or(l, |i| &l[..i]))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The leading identifier of `s` (after whitespace).
fn ident(s: &str) -> &str {
    let s = s.trim_start();
    &s[..s.find(|c| !is_ident(c)).unwrap_or(s.len())]
}

/// The first names of the paths `prefix` starts, in `code`: `a` of `crate::a::X`, and `a`, `b`
/// of `crate::{a::X, b}`.
fn heads(code: &str, prefix: &str) -> Vec<String> {
    let mut out = vec![];
    let mut from = 0;
    while let Some(i) = code[from..].find(prefix) {
        let at = from + i;
        from = at + prefix.len();
        // `mycrate::`, `$crate::`, `super::super::` are not this prefix.
        let before = code[..at].chars().next_back();
        if before.is_some_and(|c| is_ident(c) || c == '$' || c == ':') {
            continue;
        }
        let rest = &code[from..];
        if let Some(group) = rest.trim_start().strip_prefix('{') {
            // A group: split it at its top-level commas.
            let mut depth = 0;
            let mut start = 0;
            for (j, c) in group.char_indices() {
                match c {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        out.push(ident(&group[start..j]).to_string());
                        break;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        out.push(ident(&group[start..j]).to_string());
                        start = j + 1;
                    }
                    _ => {}
                }
            }
        } else {
            out.push(ident(rest).to_string());
        }
    }
    out.retain(|s| !s.is_empty());
    out
}

/// The names the crate root re-exports, each with the top-level module it comes from
/// (`pub use a::{X, Y};`, `pub use a::b::X;`).
fn root_exports(root: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for stmt in root.split(';') {
        let s = stmt.trim();
        let Some(path) = s.strip_prefix("pub use ") else {
            continue;
        };
        let path = path
            .trim()
            .trim_start_matches("crate::")
            .trim_start_matches("self::");
        let module = ident(path).to_string();
        let tail = &path[module.len()..];
        let names: Vec<&str> = match (tail.find('{'), tail.rfind('}')) {
            (Some(a), Some(b)) => tail[a + 1..b].split(',').collect(),
            _ => vec![tail.rsplit("::").next().unwrap_or("")],
        };
        for n in names {
            // `X as Y` exports `Y`; a nested path exports its last name.
            let n = n.rsplit(" as ").next().unwrap_or(n);
            let n = n.rsplit("::").next().unwrap_or(n).trim();
            if !n.is_empty() && n != "*" {
                out.insert(n.to_string(), module.clone());
            }
        }
    }
    out
}

/// The references between the top-level modules of the crate at `src_dir` (its `src`).
pub fn edges(src_dir: &Path) -> Edges {
    let files = rs_files(src_dir);
    let read =
        |p: &Path| std::fs::read_to_string(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let modules: BTreeSet<String> = files
        .iter()
        .filter_map(|f| top_module(src_dir, f))
        .collect();
    let mut exports = BTreeMap::new();
    for root in ["lib.rs", "main.rs"] {
        let p = src_dir.join(root);
        if p.exists() {
            exports.extend(root_exports(&code_of(&read(&p))));
        }
    }
    let mut out: Edges = modules
        .iter()
        .map(|m| (m.clone(), BTreeMap::new()))
        .collect();
    for f in &files {
        let Some(from) = top_module(src_dir, f) else {
            continue;
        };
        let rel = f.strip_prefix(src_dir).unwrap_or(f);
        let top_file = rel.components().count() == 1;
        let code = code_of(&read(f));
        let mut refs = heads(&code, "crate::");
        // From a top-level file, `super::` is the crate root; deeper, the same module.
        if top_file {
            refs.extend(heads(&code, "super::"));
        }
        for name in refs {
            let to = if modules.contains(&name) {
                name.clone()
            } else if let Some(m) = exports.get(&name) {
                m.clone()
            } else {
                continue;
            };
            if to != from && modules.contains(&to) {
                let place = format!("{}: {name}", rel.display());
                let places = out.entry(from.clone()).or_default().entry(to).or_default();
                if !places.contains(&place) {
                    places.push(place);
                }
            }
        }
    }
    out
}

/// The circles among the top-level modules of the crate at `src_dir`: each strongly connected
/// set of two or more modules (Tarjan), sorted; none for a layered crate.
pub fn cycles(src_dir: &Path) -> Vec<Vec<String>> {
    sccs(&edges(src_dir))
}

fn sccs(g: &Edges) -> Vec<Vec<String>> {
    struct T<'a> {
        g: &'a Edges,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(t: &mut T<'a>, v: &'a str) {
        let i = t.index.len();
        t.index.insert(v, i);
        t.low.insert(v, i);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flat_map(|m| m.keys()) {
            let w = w.as_str();
            if !t.index.contains_key(w) {
                visit(t, w);
                let l = t.low[v].min(t.low[w]);
                t.low.insert(v, l);
            } else if t.on.contains(w) {
                let l = t.low[v].min(t.index[w]);
                t.low.insert(v, l);
            }
        }
        if t.low[v] == t.index[v] {
            let mut c = vec![];
            while let Some(w) = t.stack.pop() {
                t.on.remove(w);
                c.push(w.to_string());
                if w == v {
                    break;
                }
            }
            if c.len() > 1 {
                c.sort();
                t.out.push(c);
            }
        }
    }
    let mut t = T {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: vec![],
        on: BTreeSet::new(),
        out: vec![],
    };
    for v in g.keys() {
        if !t.index.contains_key(v.as_str()) {
            visit(&mut t, v);
        }
    }
    t.out.sort();
    t.out
}

/// The circles of the crate at `src_dir` for a failure message: per circle its modules and every
/// reference between two of them, with the file that makes it. Empty when there is none.
pub fn cycle_report(src_dir: &Path) -> String {
    let g = edges(src_dir);
    let mut s = String::new();
    for c in sccs(&g) {
        s += &format!("circle among {}:\n", c.join(", "));
        for from in &c {
            for (to, places) in &g[from] {
                if c.contains(to) {
                    s += &format!("  {from} -> {to}   ({})\n", places.join("; "));
                }
            }
        }
    }
    s
}

/// The `.rs` files under `src_dir` longer than `max` lines whose first 20 lines do not say why
/// (a line containing `over {max} lines`, any case): each with its path relative to `src_dir`
/// and its line count.
pub fn long_files(src_dir: &Path, max: usize) -> Vec<(String, usize)> {
    let marker = format!("over {max} lines");
    rs_files(src_dir)
        .into_iter()
        .filter_map(|f| {
            let text =
                std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let n = text.lines().count();
            let said = text
                .lines()
                .take(20)
                .any(|l| l.to_lowercase().contains(&marker));
            let rel = f.strip_prefix(src_dir).unwrap_or(&f).display().to_string();
            (n > max && !said).then_some((rel, n))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn write(dir: &Path, files: &[(&str, &str)]) {
        for (p, text) in files {
            let p = dir.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    #[test]
    fn a_circle_is_found_and_named() {
        let dir = crate::scratch("modules-circle");
        write(
            &dir,
            &[
                (
                    "lib.rs",
                    "mod a;\nmod b;\nmod c;\nmod d;\npub use c::Gamma;\n",
                ),
                // a -> b through a group, b -> c through a root re-export, c -> a via super.
                ("a.rs", "use crate::{b::Beta, d};\npub struct Alpha;\n"),
                ("b/mod.rs", "mod inner;\npub struct Beta;\n"),
                (
                    "b/inner.rs",
                    "use super::Beta;\nfn f() -> crate::Gamma { todo!() }\n",
                ),
                ("c.rs", "pub struct Gamma(super::a::Alpha);\n"),
                // d is below them all; a doc link up is not an import.
                (
                    "d.rs",
                    "/// Used by [`crate::a::Alpha`].\npub struct Delta;\n",
                ),
            ],
        );
        assert_eq!(cycles(&dir), vec![vec!["a", "b", "c"]]);
        let r = cycle_report(&dir);
        assert!(r.contains("circle among a, b, c"), "{r}");
        assert!(r.contains("b -> c   (b/inner.rs: Gamma)"), "{r}");
        assert!(r.contains("c -> a   (c.rs: a)"), "{r}");
        assert!(!r.contains("d ->"), "{r}");
    }

    #[test]
    fn a_layered_crate_is_clean() {
        let dir = crate::scratch("modules-dag");
        write(
            &dir,
            &[
                ("lib.rs", "mod a;\nmod b;\nmod c;\npub use a::Alpha;\n"),
                (
                    "a.rs",
                    "pub struct Alpha;\n#[cfg(test)]\nmod tests { use super::*; }\n",
                ),
                ("b.rs", "use crate::Alpha;\npub struct Beta(Alpha);\n"),
                ("c/mod.rs", "mod x;\nuse crate::{a::Alpha, b::Beta};\n"),
                ("c/x.rs", "use super::super::b::Beta;\nuse crate::c::y;\n"),
            ],
        );
        assert!(cycles(&dir).is_empty(), "{}", cycle_report(&dir));
        assert_eq!(cycle_report(&dir), "");
        let e = edges(&dir);
        assert_eq!(e["c"].keys().collect::<Vec<_>>(), ["a", "b"]);
        assert!(e["a"].is_empty());
    }

    #[test]
    fn a_long_file_must_say_why() {
        let dir = crate::scratch("modules-long");
        let body = "fn f() {}\n".repeat(30);
        write(
            &dir,
            &[
                ("lib.rs", "mod a;\n"),
                ("a.rs", &body),
                (
                    "b.rs",
                    &format!("//! Over 25 lines: one state machine.\n{body}"),
                ),
                ("c.rs", "fn g() {}\n"),
            ],
        );
        assert_eq!(long_files(&dir, 25), vec![("a.rs".to_string(), 30)]);
    }
}
