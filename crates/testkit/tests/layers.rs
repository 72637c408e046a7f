//! The crates a front door reads are layered (issue 35; ARCHITECTURE.md, `measure`, `engine`,
//! `cli`): every top-level module imports only modules below it, so no two import each other,
//! through any chain. And no source file is over 800 lines unless its first 20 lines say why,
//! with a line containing "over 800 lines" (one concern that truly needs the length).

use std::path::PathBuf;

/// The crates checked, by directory under `crates/`.
const LAYERED: [&str; 3] = ["measure", "engine", "cli"];

fn src(krate: &str) -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .join(krate)
        .join("src")
}

#[test]
fn no_module_circle() {
    for krate in LAYERED {
        let src = src(krate);
        assert!(src.is_dir(), "{}", src.display());
        let cycles = testkit::modules::cycles(&src);
        assert!(
            cycles.is_empty(),
            "{krate}'s modules import each other in a circle (ARCHITECTURE.md: each layer \
             imports only those below it):\n{}",
            testkit::modules::cycle_report(&src)
        );
    }
}

#[test]
fn no_file_over_800_lines_unless_it_says_why() {
    for krate in LAYERED {
        let long = testkit::modules::long_files(&src(krate), 800);
        assert!(
            long.is_empty(),
            "{krate}: files over 800 lines without a line \"over 800 lines\" in their first 20 \
             saying why: {long:?}"
        );
    }
}
