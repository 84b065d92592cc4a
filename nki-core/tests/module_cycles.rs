//! No import cycles between nki-core's source files.
//!
//! Each `.rs` file under `nki-core/src` is a module (`mod.rs` and `lib.rs` name their folder).
//! File A depends on file B when A names a path — `crate::..`, `super::..`, `self::..` or one
//! of its child modules, in `use` lists too — that resolves to B's module (the longest module
//! prefix wins), unless B is A's own submodule (declaring and re-exporting children is how
//! Rust modules work). The whole file is read except its top-level items marked
//! `#[cfg(test)]` (unit-test modules, test-only helpers and imports). The test fails on every
//! group of files that depend on each other in a circle (a strongly connected component of two
//! or more files), listing the files and the names that tie them. It is the same rule as
//! `shared/tools/module-cycles`, written for CI, which has no copy of that tool.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A module path inside the crate (`["hbm", "view"]` for `src/hbm/view.rs`).
type ModPath = Vec<String>;

/// The module path of source file `f` under `src`.
fn mod_path(src: &Path, f: &Path) -> ModPath {
    let rel = f
        .strip_prefix(src)
        .expect("file under src")
        .with_extension("");
    let mut segs: ModPath = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if matches!(
        segs.last().map(String::as_str),
        Some("mod" | "lib" | "main")
    ) {
        segs.pop();
    }
    segs
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).expect("readable source folder") {
        let p = e.expect("directory entry").path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without comments, string contents and top-level items marked
/// `#[cfg(test)]` (the unit tests).
fn code_of(text: &str) -> String {
    let b = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'/' if b.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < b.len() {
                    if b[i] == b'/' && b.get(i + 1) == Some(&b'*') {
                        depth += 1;
                        i += 2;
                    } else if b[i] == b'*' && b.get(i + 1) == Some(&b'/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            b'r' if matches!(b.get(i + 1), Some(b'"' | b'#'))
                && (i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_')) =>
            {
                // A raw string r"..", r#".."#.
                let mut j = i + 1;
                let mut hashes = 0;
                while b.get(j) == Some(&b'#') {
                    hashes += 1;
                    j += 1;
                }
                if b.get(j) != Some(&b'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                j += 1;
                loop {
                    if j >= b.len() {
                        break;
                    }
                    if b[j] == b'"'
                        && b[j + 1..]
                            .iter()
                            .take(hashes)
                            .filter(|&&c| c == b'#')
                            .count()
                            == hashes
                    {
                        j += 1 + hashes;
                        break;
                    }
                    j += 1;
                }
                out.push_str("\"\"");
                i = j;
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' => {
                // A char literal ('x', '\n', '"') or a lifetime ('a).
                let end = if b.get(i + 1) == Some(&b'\\') {
                    b[i + 2..]
                        .iter()
                        .position(|&c| c == b'\'')
                        .map(|k| i + 2 + k)
                } else if b.get(i + 2) == Some(&b'\'') {
                    Some(i + 2)
                } else {
                    None
                };
                match end {
                    Some(e) => {
                        out.push_str("' '");
                        i = e + 1;
                    }
                    None => {
                        out.push('\'');
                        i += 1;
                    }
                }
            }
            _ => {
                let ch = text[i..].chars().next().expect("char boundary");
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    without_test_items(&out)
}

/// `code` without its top-level items marked `#[cfg(test)]` (at the start of a line): each
/// such item runs from the attribute to the `;` or the closing `}` at its own depth, whichever
/// comes first (`mod tests;`, `mod tests { .. }`, `use ..;`, `fn .. { .. }`). Everything
/// before and after it stays. `code` has no comments or string contents left, so every brace
/// counted is code.
fn without_test_items(code: &str) -> String {
    const MARK: &str = "#[cfg(test)]";
    let mut out = String::with_capacity(code.len());
    let mut pos = 0;
    while let Some(k) = code[pos..].find(MARK) {
        let at = pos + k;
        let line_start = at == 0 || code.as_bytes()[at - 1] == b'\n';
        if !line_start {
            out.push_str(&code[pos..at + MARK.len()]);
            pos = at + MARK.len();
            continue;
        }
        out.push_str(&code[pos..at]);
        let mut depth = 0usize;
        let mut end = code.len();
        for (i, ch) in code[at + MARK.len()..].char_indices() {
            let i = at + MARK.len() + i;
            match ch {
                '{' => depth += 1,
                '}' => {
                    depth = depth.saturating_sub(1);
                    if depth == 0 {
                        end = i + 1;
                        break;
                    }
                }
                ';' if depth == 0 => {
                    end = i + 1;
                    break;
                }
                _ => {}
            }
        }
        pos = end;
    }
    out.push_str(&code[pos..]);
    out
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths of a `use` tree: `a::{b, c::{d, e as f}}` gives `a::b`, `a::c::d`, `a::c::e`.
fn expand_use(body: &str) -> Vec<String> {
    fn rec(prefix: &str, s: &str, out: &mut Vec<String>) {
        let mut depth = 0;
        let mut parts = Vec::new();
        let mut start = 0;
        for (i, ch) in s.char_indices() {
            match ch {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    parts.push(&s[start..i]);
                    start = i + 1;
                }
                _ => {}
            }
        }
        parts.push(&s[start..]);
        for p in parts.into_iter().filter(|p| !p.is_empty()) {
            match p.find("::{") {
                Some(k) if p.ends_with('}') => rec(
                    &format!("{prefix}{}::", &p[..k]),
                    &p[k + 3..p.len() - 1],
                    out,
                ),
                _ => out.push(format!("{prefix}{}", p.split(" as ").next().unwrap_or(p))),
            }
        }
    }
    // Keep the spaces around `as`, drop every other space.
    let squeezed: String = body.split_whitespace().collect::<Vec<_>>().join(" ");
    let tight = squeezed
        .replace(" as ", "\u{1}")
        .replace(' ', "")
        .replace('\u{1}', " as ");
    let mut out = Vec::new();
    rec("", &tight, &mut out);
    out
}

/// Every path the code names: the trees of its `use` items and each `crate::..`,
/// `super::..` and `self::..` path elsewhere.
fn paths_of(code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let starts_word = |i: usize| i == 0 || !code[..i].chars().next_back().is_some_and(is_ident);
    // `use` items.
    let mut from = 0;
    while let Some(k) = code[from..].find("use") {
        let i = from + k;
        from = i + 3;
        let next = code[from..].chars().next();
        if starts_word(i) && next.is_some_and(char::is_whitespace) {
            if let Some(end) = code[from..].find(';') {
                paths.extend(expand_use(&code[from..from + end]));
            }
        }
    }
    // `crate::a::b`, `super::a`, `self::a` paths.
    for root in ["crate", "super", "self"] {
        let mut from = 0;
        while let Some(k) = code[from..].find(root) {
            let i = from + k;
            from = i + root.len();
            if !starts_word(i) || !code[from..].starts_with("::") {
                continue;
            }
            let mut end = from;
            while code[end..].starts_with("::") {
                let seg: usize = code[end + 2..]
                    .chars()
                    .take_while(|&c| is_ident(c))
                    .map(char::len_utf8)
                    .sum();
                if seg == 0 {
                    break;
                }
                end += 2 + seg;
            }
            if end > from {
                paths.push(code[i..end].to_string());
            }
        }
    }
    paths
}

/// The dependency graph: for each file's module, the modules it names and the names that
/// tie them.
type Graph = BTreeMap<ModPath, BTreeMap<ModPath, BTreeSet<String>>>;

/// The dependency graph of the source files `files` (module path -> code).
fn graph(files: &BTreeMap<ModPath, String>) -> Graph {
    let mut edges: Graph = BTreeMap::new();
    for (mp, code) in files {
        let from = edges.entry(mp.clone()).or_default();
        for p in paths_of(code) {
            let segs: Vec<&str> = p.split("::").collect();
            let child = {
                let mut c = mp.clone();
                c.push(segs[0].to_string());
                c
            };
            let (mut full, rest): (ModPath, &[&str]) = if segs[0] == "crate" {
                (Vec::new(), &segs[1..])
            } else if segs[0] == "self" {
                (mp.clone(), &segs[1..])
            } else if files.contains_key(&child) {
                (mp.clone(), &segs[..])
            } else if segs[0] == "super" {
                let mut base = mp.clone();
                let mut rest = &segs[..];
                while rest.first() == Some(&"super") {
                    base.pop();
                    rest = &rest[1..];
                }
                (base, rest)
            } else {
                continue;
            };
            full.extend(rest.iter().map(|s| s.to_string()));
            for k in (0..=full.len()).rev() {
                if files.contains_key(&full[..k]) {
                    let target = full[..k].to_vec();
                    if !target.starts_with(mp) {
                        let name = full.get(k).or(full.last()).cloned().unwrap_or_default();
                        from.entry(target).or_default().insert(name);
                    }
                    break;
                }
            }
        }
    }
    edges
}

/// The strongly connected components of two or more modules (Tarjan).
fn cycles(g: &Graph) -> Vec<Vec<ModPath>> {
    struct State<'g> {
        g: &'g Graph,
        index: BTreeMap<&'g ModPath, usize>,
        low: BTreeMap<&'g ModPath, usize>,
        stack: Vec<&'g ModPath>,
        on: BTreeSet<&'g ModPath>,
        comps: Vec<Vec<ModPath>>,
    }
    fn visit<'g>(s: &mut State<'g>, v: &'g ModPath) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        let g = s.g;
        for w in g.get(v).into_iter().flat_map(|e| e.keys()) {
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = s.stack.pop().expect("on the stack");
                s.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                s.comps.push(comp);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        comps: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v) {
            visit(&mut s, v);
        }
    }
    s.comps
}

/// The report of the cycles in `g` ("" when there are none): one block per cycle, one line
/// per edge inside it with the names that tie the two files.
fn report(g: &Graph, file_of: &BTreeMap<ModPath, String>) -> String {
    let mut out = String::new();
    for comp in cycles(g) {
        out += &format!("cycle of {} files:\n", comp.len());
        for a in &comp {
            for (b, names) in &g[a] {
                if comp.contains(b) {
                    let names: Vec<&str> = names.iter().map(String::as_str).collect();
                    out += &format!("  {} -> {}: {}\n", file_of[a], file_of[b], names.join(", "));
                }
            }
        }
    }
    out
}

/// The graph and file names of the crate source folder `src`.
fn load(src: &Path) -> (Graph, BTreeMap<ModPath, String>) {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let mut code = BTreeMap::new();
    let mut names = BTreeMap::new();
    for f in files {
        let mp = mod_path(src, &f);
        let text = std::fs::read_to_string(&f).expect("readable source file");
        code.insert(mp.clone(), code_of(&text));
        let rel = f.strip_prefix(src.parent().unwrap_or(src)).unwrap_or(&f);
        names.insert(mp, rel.display().to_string());
    }
    (graph(&code), names)
}

#[test]
fn nki_core_has_no_import_cycles() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let (g, names) = load(&src);
    assert!(
        g.len() > 50,
        "found only {} source files in {}",
        g.len(),
        src.display()
    );
    let r = report(&g, &names);
    assert!(
        r.is_empty(),
        "nki-core's source files import each other in a circle:\n{r}"
    );
}

/// The checker finds what it must: a two-file circle through `use super::..` and a
/// `crate::..` path, a circle between two children of one parent, the code after an item
/// marked `#[cfg(test)]`; and nothing in code that is only commented out, quoted or under
/// `#[cfg(test)]`, nor in a parent's ties to its own children.
#[test]
fn the_checker_sees_circles_and_ignores_comments_strings_and_tests() {
    let files = |list: &[(&str, &str)]| -> BTreeMap<ModPath, String> {
        list.iter()
            .map(|(p, c)| {
                let mp = p
                    .split('/')
                    .filter(|s| !s.is_empty())
                    .map(String::from)
                    .collect();
                (mp, code_of(c))
            })
            .collect()
    };
    let names = |f: &BTreeMap<ModPath, String>| -> BTreeMap<ModPath, String> {
        f.keys()
            .map(|k| (k.clone(), format!("{}.rs", k.join("/"))))
            .collect()
    };
    // a -> b (crate path), b -> a (use tree).
    let two = files(&[
        ("", "mod a; mod b;"),
        ("a", "fn f() { crate::b::g() }"),
        (
            "b",
            "use crate::{a::{Thing, Other as O}, c};\npub fn g() {}",
        ),
    ]);
    let r = report(&graph(&two), &names(&two));
    assert!(r.contains("cycle of 2 files"), "{r}");
    assert!(r.contains("a.rs -> b.rs: g"), "{r}");
    assert!(r.contains("b.rs -> a.rs: Other, Thing"), "{r}");
    // A parent re-exporting its child while the child names the parent's item through
    // `super` is how Rust modules work, no circle; two children naming each other through
    // `super` are one.
    let parent = files(&[
        ("", "mod h;"),
        ("h", "mod v; mod w; pub use v::View; pub struct Store;"),
        (
            "h/v",
            "use super::Store; pub struct View; fn f() { super::w::g() }",
        ),
        ("h/w", "pub fn g() {} fn k(_: super::v::View) {}"),
    ]);
    let r = report(&graph(&parent), &names(&parent));
    assert!(r.contains("cycle of 2 files"), "{r}");
    assert!(
        r.contains("h/v.rs -> h/w.rs: g") && r.contains("h/w.rs -> h/v.rs: View"),
        "{r}"
    );
    assert!(!r.contains("h.rs"), "{r}");
    // An item marked `#[cfg(test)]` is left out, the code after it is still read.
    let after = files(&[
        ("", "mod a; mod b;"),
        ("a", "pub fn e() {}\npub fn f() {}"),
        (
            "b",
            "pub fn g() {}\n#[cfg(test)]\nuse crate::a::f;\n#[cfg(test)]\nfn t() { let _ = '{'; f() }\nfn h() { crate::a::e() }",
        ),
    ]);
    let g = graph(&after);
    let b: ModPath = vec!["b".to_string()];
    let a: ModPath = vec!["a".to_string()];
    assert_eq!(
        g[&b].get(&a).map(|n| n.iter().cloned().collect::<Vec<_>>()),
        Some(vec!["e".to_string()]),
        "{g:?}"
    );
    // The same names in comments, strings and unit tests tie nothing.
    let quiet = files(&[
        ("", "mod a; mod b;"),
        (
            "a",
            "// crate::b::g\n/* use crate::b; */ fn f() -> &'static str { \"crate::b::g\" }",
        ),
        (
            "b",
            "pub fn g() {}\n#[cfg(test)]\nmod tests { use crate::a::f; }",
        ),
    ]);
    assert_eq!(report(&graph(&quiet), &names(&quiet)), "");
    // One way only is no circle.
    let one = files(&[
        ("", "mod a; mod b;"),
        ("a", "use crate::b::g;"),
        ("b", "pub fn g() {}"),
    ]);
    assert_eq!(report(&graph(&one), &names(&one)), "");
}
