//! The NKI 0.8 API the emitter writes, as a machine-readable list ([`API_08`], kept in
//! `api08.txt` beside this file), and the check that a Python module uses only its names and
//! keywords ([`check_api`]).

use crate::error::{ErrorKind, NkiError, Result};
use std::collections::HashMap;

/// The NKI 0.8 names the emitter may write, one a line: `name` for a module, decorator or
/// constant; `name(kw, ...)` for a callable and the keywords it takes; `.method(kw, ...)` for a
/// tensor method. Lines starting with `#` are comments.
pub const API_08: &str = include_str!("api08.txt");

/// One entry of [`API_08`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiEntry {
    /// The name (`nisa.dma_copy`, `nl.sbuf`, `.ap`).
    pub name: String,
    /// The keywords of a callable; `None` for a name that is not called.
    pub keywords: Option<Vec<String>>,
}

/// The entries of [`API_08`].
pub fn api_entries() -> Vec<ApiEntry> {
    API_08
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once('(') {
            Some((name, rest)) => ApiEntry {
                name: name.to_string(),
                keywords: Some(
                    rest.trim_end_matches(')')
                        .split(',')
                        .map(|k| k.trim().to_string())
                        .filter(|k| !k.is_empty())
                        .collect(),
                ),
            },
            None => ApiEntry {
                name: l.to_string(),
                keywords: None,
            },
        })
        .collect()
}

/// Checks that the Python source `module` names only entries of [`API_08`] under `nki.`,
/// `nl.` and `nisa.` (and `.ap(`), each call with keywords its entry lists. Comments and
/// string literals are skipped. The error lists every unknown name and keyword with its line.
pub fn check_api(module: &str) -> Result<()> {
    let entries: HashMap<String, Option<Vec<String>>> = api_entries()
        .into_iter()
        .map(|e| (e.name, e.keywords))
        .collect();
    let code = strip_strings(module);
    let mut problems = Vec::new();
    let bytes = code.as_bytes();
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut i = 0;
    while i < bytes.len() {
        let after_word = i > 0 && (word(bytes[i - 1]) || bytes[i - 1] == b'.');
        let method = code[i..].starts_with(".ap(");
        if !method && (after_word || !word(bytes[i])) {
            i += 1;
            continue;
        }
        let mut j = i + 1;
        while j < bytes.len() && (word(bytes[j]) || bytes[j] == b'.') {
            j += 1;
        }
        let name = &code[i..j];
        let ours =
            method || name == "nki" || ["nki.", "nl.", "nisa."].iter().any(|p| name.starts_with(p));
        if !ours {
            i = j;
            continue;
        }
        let line = code[..i].matches('\n').count() + 1;
        match entries.get(name) {
            None => problems.push(format!("line {line}: '{name}' is not NKI 0.8 API")),
            Some(None) if bytes.get(j) == Some(&b'(') => {
                problems.push(format!("line {line}: '{name}' is not callable"))
            }
            Some(None) => {}
            Some(Some(_)) if bytes.get(j) != Some(&b'(') => {}
            Some(Some(kws)) => {
                for kw in keywords(&code[j..]) {
                    if !kws.iter().any(|k| k == &kw) {
                        problems.push(format!(
                            "line {line}: '{name}' has no keyword '{kw}' in NKI 0.8"
                        ));
                    }
                }
            }
        }
        i = j;
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(NkiError::new(
            ErrorKind::InvalidArgument,
            "emit",
            format!(
                "the module uses names outside the NKI 0.8 API list: {}",
                problems.join("; ")
            ),
        ))
    }
}

/// The keywords (`kw=`) at the top level of the call whose `(` starts `call`.
fn keywords(call: &str) -> Vec<String> {
    let b = call.as_bytes();
    let mut depth = 0usize;
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => {
                depth -= 1;
                if depth == 0 {
                    break;
                }
            }
            b'=' if depth == 1 => {
                let next = b.get(i + 1).copied();
                let prev = if i > 0 { b[i - 1] } else { b' ' };
                if next != Some(b'=') && !matches!(prev, b'=' | b'!' | b'<' | b'>') {
                    let mut s = i;
                    while s > 0 && (b[s - 1] == b' ') {
                        s -= 1;
                    }
                    let end = s;
                    while s > 0 && (b[s - 1].is_ascii_alphanumeric() || b[s - 1] == b'_') {
                        s -= 1;
                    }
                    out.push(call[s..end].to_string());
                }
            }
            _ => {}
        }
        i += 1;
    }
    out
}

/// `src` with comments and string literals blanked (newlines kept, so lines still count).
fn strip_strings(src: &str) -> String {
    let mut out = String::with_capacity(src.len());
    let mut chars = src.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '#' => {
                for d in chars.by_ref() {
                    if d == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '"' | '\'' => {
                let triple = {
                    let mut it = chars.clone();
                    it.next() == Some(c) && it.next() == Some(c)
                };
                if triple {
                    chars.next();
                    chars.next();
                }
                out.push(' ');
                let mut run = 0;
                while let Some(d) = chars.next() {
                    if d == '\n' {
                        out.push('\n');
                    }
                    if d == '\\' {
                        chars.next();
                        run = 0;
                        continue;
                    }
                    if d == c {
                        run += 1;
                        if !triple || run == 3 {
                            break;
                        }
                    } else {
                        run = 0;
                    }
                }
                out.push(' ');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn listed_names_and_keywords_pass() {
        let src = "import nki\nimport nki.language as nl\n@nki.jit\ndef k(a):\n    \
                   t = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)\n    \
                   nisa.dma_copy(dst=t, src=a.ap(pattern=[[512, 128], [1, 512]], offset=0))\n";
        check_api(src).unwrap();
    }

    #[test]
    fn unknown_names_and_keywords_fail_with_their_line() {
        let e = check_api("x = nl.load(a)\nnisa.tensor_copy(dst=t, src=u, dtype=nl.float32)\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("line 1: 'nl.load' is not NKI 0.8 API"), "{e}");
        assert!(
            e.contains("line 2: 'nisa.tensor_copy' has no keyword 'dtype'"),
            "{e}"
        );
    }

    #[test]
    fn strings_and_comments_are_not_code() {
        check_api("# nl.load(x)\ns = \"nl.load\"\nd = \"\"\"nisa.foo(bar=1)\"\"\"\n").unwrap();
    }
}
