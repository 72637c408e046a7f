//! measure is layered (issue 35, "measure without circles"; ARCHITECTURE.md, measure): every
//! top-level module imports only modules below it, so no two import each other, through any
//! chain. And no source file is over 800 lines unless its first 20 lines say why, with a line
//! containing "over 800 lines" (one concern that truly needs the length).

use std::path::Path;

fn src() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

#[test]
fn no_module_circle() {
    let cycles = testkit::modules::cycles(src());
    assert!(
        cycles.is_empty(),
        "measure's modules import each other in a circle (ARCHITECTURE.md, measure: each layer \
         imports only those below it):\n{}",
        testkit::modules::cycle_report(src())
    );
}

#[test]
fn no_file_over_800_lines_unless_it_says_why() {
    let long = testkit::modules::long_files(src(), 800);
    assert!(
        long.is_empty(),
        "files over 800 lines without a line \"over 800 lines\" in their first 20 saying why: \
         {long:?}"
    );
}
