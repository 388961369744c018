//! The docs point only at files that exist: every relative link in `README.md`, every path of this
//! repository the README quotes (`controller/src/job/`), and every file the command-line help of
//! `minik8s` and its subcommands names (`BENCHMARKS.md`).

use std::path::{Path, PathBuf};
use std::process::Command;

/// The repository's top-level folders: a quoted path starting with one is a path of this repository.
const TOP: [&str; 11] = [
    "api/",
    "apiserver/",
    "cel/",
    "client/",
    "controller/",
    "examples/",
    "kubelet-fake/",
    "schema/",
    "src/",
    "store/",
    "tests/",
];

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .unwrap_or_default()
}

/// The targets of markdown links `[text](target)` that are neither URLs nor in-page anchors.
fn relative_links(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("](") {
        let rest = &text[i + 2..];
        let Some(end) = rest.find(')') else { continue };
        let target = rest[..end].split('#').next().unwrap_or("").trim();
        if target.is_empty() || target.contains("://") || target.starts_with("mailto:") {
            continue;
        }
        out.push(target.to_string());
    }
    out
}

/// Backquoted words that name a path of this repository or a markdown file.
fn quoted_paths(text: &str) -> Vec<String> {
    text.split('`')
        .skip(1)
        .step_by(2)
        .filter(|w| !w.contains(char::is_whitespace) && !w.contains(['<', '>', '*', '…', '{']))
        .filter(|w| TOP.iter().any(|t| w.starts_with(t)) || w.ends_with(".md"))
        .map(str::to_string)
        .collect()
}

fn missing(paths: impl IntoIterator<Item = String>) -> Vec<String> {
    let root = root();
    paths
        .into_iter()
        .filter(|p| !root.join(p).exists())
        .collect()
}

#[test]
fn readme_links_and_quoted_paths_exist() {
    let readme = std::fs::read_to_string(root().join("README.md")).unwrap_or_default();
    assert!(!readme.is_empty(), "README.md is missing");
    let quoted = quoted_paths(&readme);
    assert!(
        quoted.len() > 20,
        "the README quotes repository paths: {quoted:?}"
    );
    let gone = missing(relative_links(&readme).into_iter().chain(quoted));
    assert!(
        gone.is_empty(),
        "README.md names files that do not exist: {gone:?}"
    );
}

/// The words of a help text that name files: `*.md`, `*.yaml`, or a repository path.
fn named_files(help: &str) -> Vec<String> {
    help.split(|c: char| c.is_whitespace() || "(),;:`'\"".contains(c))
        .map(|w| w.trim_end_matches('.'))
        .filter(|w| {
            [".md", ".yaml", ".yml", ".toml"]
                .iter()
                .any(|ext| w.ends_with(ext))
                || TOP.iter().any(|t| w.starts_with(t))
        })
        .map(str::to_string)
        .collect()
}

#[test]
fn files_named_by_the_command_line_help_exist() {
    let help = |args: &[&str]| {
        let out = Command::new(tests::binary_path())
            .args(args)
            .arg("--help")
            .output()
            .unwrap_or_else(|e| panic!("run minik8s {args:?} --help: {e}"));
        assert!(out.status.success(), "minik8s {args:?} --help failed");
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let mut named = Vec::new();
    for sub in [
        &[][..],
        &["up"],
        &["apiserver"],
        &["controller-manager"],
        &["kubelet"],
        &["bench"],
    ] {
        named.extend(named_files(&help(sub)));
    }
    assert!(
        named.iter().any(|f| f == "BENCHMARKS.md"),
        "`minik8s bench --help` names where the figures are: {named:?}"
    );
    let gone = missing(named);
    assert!(
        gone.is_empty(),
        "the help names files that do not exist: {gone:?}"
    );
}

#[test]
fn the_checks_see_what_they_check() {
    let text =
        "see [the design](docs/x.md#top), [web](https://k8s.io) and `src/bench/` or `<dir>/pki`";
    assert_eq!(relative_links(text), vec!["docs/x.md"]);
    assert_eq!(quoted_paths(text), vec!["src/bench/"]);
    assert_eq!(
        named_files("Measure (see BENCHMARKS.md). Config: kubelet-fake/src/config.rs."),
        vec!["BENCHMARKS.md", "kubelet-fake/src/config.rs"]
    );
}
