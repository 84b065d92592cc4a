//! Writing the files users ask for (reports, traces, tables): an error names what was written
//! and the path, not only the operating system's reason ("No such file or directory").

use std::io::{self, Write};
use std::path::Path;

/// `e`, a failure to write `what` to `path`, with both named in its message (its kind kept).
fn named(e: io::Error, what: &str, path: &Path) -> io::Error {
    io::Error::new(
        e.kind(),
        format!("could not write {what} to {}: {e}", path.display()),
    )
}

/// Writes `contents` (`what`, e.g. "the HTML report") to `path`.
pub(crate) fn write(path: &Path, what: &str, contents: impl AsRef<[u8]>) -> io::Result<()> {
    std::fs::write(path, contents).map_err(|e| named(e, what, path))
}

/// Creates `path` and streams `what` into it with `fill` (buffered); an error of the creation,
/// of `fill` or of the final flush names `what` and the path.
pub(crate) fn stream(
    path: &Path,
    what: &str,
    fill: impl FnOnce(&mut io::BufWriter<std::fs::File>) -> io::Result<()>,
) -> io::Result<()> {
    let f = std::fs::File::create(path).map_err(|e| named(e, what, path))?;
    let mut w = io::BufWriter::new(f);
    fill(&mut w)
        .and_then(|()| w.flush())
        .map_err(|e| named(e, what, path))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_write_into_a_missing_folder_names_what_and_where() {
        let path = std::env::temp_dir()
            .join("nki-files-test-no-such-folder")
            .join("x.html");
        let e = write(&path, "the HTML report", "x").unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::NotFound);
        let m = e.to_string();
        assert!(m.contains("the HTML report"), "{m}");
        assert!(m.contains(&path.display().to_string()), "{m}");
        let e = stream(&path, "the trace", |w| w.write_all(b"x")).unwrap_err();
        assert!(e.to_string().contains("the trace"), "{e}");
    }
}
