//! `testkit-runner new DIR`: a suite workspace that runs green at once,
//! against the default pod (`sandboxd`), or pointed at a service of the
//! user's with `--pod-command`: `Cargo.toml` (its own workspace), a
//! `Cargo.lock` of the versions testkit is tested with, a commented
//! `testkit.toml`, `KNOWN-ISSUES.md`, `.config/nextest.toml`, `.gitignore`
//! and one test binary.

use std::path::{Path, PathBuf};

use clap::Args;

use crate::checkout::{self, Sources};
use crate::errors::ExpectedError;

#[derive(Debug, Args)]
pub(crate) struct NewArgs {
    /// The folder to create the suite in: new, or empty.
    dir: PathBuf,
    /// The command that starts your service, instead of the default pod
    /// (`sandboxd`), split on spaces; `{listen}` (127.0.0.1:PORT), `{port}`
    /// and `{home}` (a fresh HOME) are filled. The suite then waits for
    /// HEALTH_PATH to answer, sends no credential, and has no resource kind
    /// yet: its testkit.toml says where each goes.
    #[arg(long, value_name = "COMMAND")]
    pod_command: Option<String>,
    /// With --pod-command: your service's unauthenticated health path.
    #[arg(long, value_name = "HEALTH_PATH", default_value = "/health")]
    health_path: String,
    /// The testkit crate the suite depends on, by path. Default: that of the
    /// checkout `TESTKIT_SOURCES` names (a folder, or `none` for testkit of
    /// this runner's version from the registry); unset, the checkout this
    /// runner was built from while it is there, else the registry.
    #[arg(long, value_name = "DIR")]
    testkit: Option<PathBuf>,
}

/// The files of a new suite, and what fills them.
const FILES: &[(&str, &str)] = &[
    ("Cargo.toml", include_str!("Cargo.toml.in")),
    ("tests/Cargo.toml", include_str!("tests.Cargo.toml.in")),
    ("tests/tests/smoke.rs", include_str!("smoke.rs.in")),
    ("testkit.toml", include_str!("testkit.toml.in")),
    ("KNOWN-ISSUES.md", include_str!("KNOWN-ISSUES.md.in")),
    (".config/nextest.toml", include_str!("nextest.toml.in")),
    (".gitignore", "/target\n"),
];

/// With testkit by path: its crates built whole, as a registry's are.
const BUILT_WHOLE: &str = "
# testkit is a path dependency here, which cargo would build incrementally,
# in many objects that every test binary links. Built whole, they link
# sooner. Drop these two when testkit comes from a registry.
[profile.dev.package.testkit]
incremental = false
[profile.dev.package.testkit-engine]
incremental = false
";

/// The default pod's resource kind, and a test that creates one.
const SANDBOX_KIND: &str = r#"# A resource kind: how testkit finds, deletes and lists what tests create.
[resources.sandbox]
exists = "GET /api/sandboxes/{name}"
delete = "DELETE /api/sandboxes/{name}"
list = "GET /api/sandboxes?prefix={prefix}&limit=1000"
list_names = "/items/*/name"
next_page = "/next_page_token"
budget = 16"#;

const SANDBOX_TEST: &str = r#"
/// A sandbox the test creates is named from the run, and deleted (and
/// verified gone) by testkit when the test ends, whatever happened.
#[testkit::test]
async fn a_sandbox_is_created_and_listed(cx: &mut Cx) -> testkit::Result {
    let pod = cx.pod()?;
    let name = cx.unique_name();
    cx.create("sandbox", &name, async {
        pod.client()
            .post(pod.url("/api/sandboxes"))
            .json(&serde_json::json!({ "name": name }))
            .send()
            .await?
            .error_for_status()
    })
    .await?;
    let listed = pod
        .client()
        .get(pod.url(&format!("/api/sandboxes?prefix={name}")))
        .send()
        .await?
        .text()
        .await?;
    ensure!(listed.contains(&name), "{name} is not listed: {listed}");
    Ok(())
}
"#;

const CUSTOM_KIND: &str = r#"# A resource kind for each thing your tests create, so that testkit deletes
# it after the test, proves it gone, and sweeps the run's residue:
# [resources.item]
# exists = "GET /api/items/{name}"
# delete = "DELETE /api/items/{name}"
# list = "GET /api/items?prefix={prefix}"
# list_names = "/items/*/name""#;

const CUSTOM_TEST: &str = r#"
// A test that creates something declares its kind in testkit.toml, then:
//
//     let name = cx.unique_name();
//     cx.create("item", &name, async {
//         pod.client().post(pod.url("/api/items"))
//             .json(&serde_json::json!({ "name": name }))
//             .send().await?.error_for_status()
//     })
//     .await?;
"#;

pub(crate) fn run(args: NewArgs) -> Result<(), ExpectedError> {
    let dir = &args.dir;
    let occupied = std::fs::read_dir(dir).is_ok_and(|mut entries| entries.next().is_some());
    if occupied || dir.is_file() {
        return Err(ExpectedError::bad_args(format_args!(
            "new: {} exists and is not empty: give a new folder, or an empty one",
            dir.display()
        )));
    }
    // The testkit crate the suite depends on by path, or none: testkit of
    // this runner's version from the registry.
    let testkit = match &args.testkit {
        Some(t) => Some(t.clone()),
        None => match Sources::from_env()
            .map_err(|e| ExpectedError::bad_args(format_args!("new: {e}")))?
        {
            Sources::Checkout(root) => Some(root.join("testkit")),
            Sources::Registry => None,
        },
    };
    if let Some(testkit) = &testkit {
        if !testkit.join("Cargo.toml").is_file() {
            return Err(ExpectedError::bad_args(format_args!(
                "new: {} is not the testkit crate (it has no Cargo.toml): give it with --testkit DIR",
                testkit.display()
            )));
        }
    }
    let name = package_name(dir);
    let mut fill = fills(
        &args,
        &name,
        testkit.as_deref().map(|t| dir_relative(dir, t)),
    )?;
    // The book beside the testkit crate the suite uses, else online.
    let checkout = testkit.as_deref().and_then(Path::parent);
    fill.push((
        "@BOOK_TOML@",
        checkout::book_page_in(checkout, "book/src/testkit-toml.md"),
    ));
    for (path, template) in FILES {
        let target = dir.join(path);
        let text = fill
            .iter()
            .fold(template.to_string(), |text, (key, value)| {
                text.replace(key, value)
            });
        write(&target, &text)?;
    }
    // The versions testkit is tested with: the suite builds them on the
    // first try, and commits the lockfile. (From a registry, cargo resolves
    // them on the first build.)
    if let Some(lock) = testkit
        .as_deref()
        .and_then(Path::parent)
        .map(|w| w.join("suites/conformance/Cargo.lock"))
    {
        if lock.is_file() {
            std::fs::copy(&lock, dir.join("Cargo.lock")).map_err(|e| {
                ExpectedError::Incomplete(format!("new: cannot copy {}: {e}", lock.display()))
            })?;
        }
    }
    println!("created the suite {name} in {}", dir.display());
    println!("run it:   testkit-runner run {}", dir.display());
    println!("check it: testkit-runner check {}", dir.display());
    println!(
        "commit Cargo.lock with it; the testkit book says how to write tests: {}",
        checkout::book_page_in(checkout, "book/src/writing-tests.md")
    );
    Ok(())
}

/// What fills the templates' `@KEY@`s.
fn fills(
    args: &NewArgs,
    name: &str,
    testkit: Option<PathBuf>,
) -> Result<Vec<(&'static str, String)>, ExpectedError> {
    let prefix: String = name
        .chars()
        .filter(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
        .take(8)
        .collect();
    let mut fill = vec![
        ("@NAME@", name.to_owned()),
        (
            "@PREFIX@",
            if prefix.is_empty() {
                "t".to_owned()
            } else {
                prefix
            },
        ),
    ];
    match testkit {
        Some(path) => fill.extend([
            (
                "@TESTKIT@",
                format!(
                    "{{ path = {} }}",
                    serde_json::Value::from(path.display().to_string())
                ),
            ),
            ("@BUILT_WHOLE@", BUILT_WHOLE.to_owned()),
        ]),
        None => fill.extend([
            ("@TESTKIT@", format!("\"{}\"", checkout::VERSION)),
            ("@BUILT_WHOLE@", String::new()),
        ]),
    }
    match &args.pod_command {
        None => fill.extend([
            ("@COMMAND@", r#"["sandboxd", "serve"]"#.to_owned()),
            ("@READY@", "handle".to_owned()),
            ("@HEALTH@", "/api/health".to_owned()),
            (
                "@FIELDS@",
                r#"# fields = { user = "admin@example.test", password = "{random}" }"#.to_owned(),
            ),
            ("@RESOURCES@", SANDBOX_KIND.to_owned()),
            ("@RESOURCE_TEST@", SANDBOX_TEST.to_owned()),
        ]),
        Some(command) => {
            let words: Vec<&str> = command.split_whitespace().collect();
            if words.is_empty() {
                return Err(ExpectedError::bad_args(
                    "new: --pod-command is empty: give the command that starts your service, e.g. --pod-command \"my-service --listen {listen}\"",
                ));
            }
            // Written into testkit.toml and a Rust string as it is: a path
            // of plain characters, or refused here rather than a suite that
            // does not parse.
            let health = &args.health_path;
            if !health.starts_with('/')
                || health.chars().any(|c| {
                    c.is_whitespace() || c.is_control() || matches!(c, '"' | '\\' | '{' | '}' | '#')
                })
            {
                return Err(ExpectedError::bad_args(format_args!(
                    "new: --health-path {health:?} is not a URL path: give one that starts with `/` \
                     and holds no spaces, quotes, backslashes, braces or `#`, e.g. --health-path /health"
                )));
            }
            let quoted: Vec<String> = words
                .iter()
                .map(|w| serde_json::Value::from(*w).to_string())
                .collect();
            let command = format!("[{}]", quoted.join(", "));
            fill.extend([
                ("@COMMAND@", command),
                ("@READY@", "health".to_owned()),
                ("@HEALTH@", args.health_path.clone()),
                (
                    "@FIELDS@",
                    "fields = { user = \"admin\", password = \"{random}\" }\npublic_fields = [\"user\"]\n\n# Your service's credential: none until you say how.\n[auth]\nsend = \"none\"\n\n[capabilities]\nlist = []".to_owned(),
                ),
                ("@RESOURCES@", CUSTOM_KIND.to_owned()),
                ("@RESOURCE_TEST@", CUSTOM_TEST.to_owned()),
            ]);
        }
    }
    Ok(fill)
}

/// `dir`'s name as a package name: lowercase letters, digits and `-`.
fn package_name(dir: &Path) -> String {
    let raw = dir
        .file_name()
        .map(|n| n.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    let name: String = raw
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect::<String>()
        .trim_matches('-')
        .to_owned();
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        format!("suite-{name}").trim_end_matches('-').to_owned()
    } else {
        name
    }
}

/// `target` as a path from inside `dir` (which may not exist yet): relative
/// where both are under one root, so that the suite can be moved with it.
fn dir_relative(dir: &Path, target: &Path) -> PathBuf {
    let absolute = |p: &Path| std::path::absolute(p).unwrap_or_else(|_| p.to_owned());
    let target = target.canonicalize().unwrap_or_else(|_| absolute(target));
    let dir = absolute(dir);
    let dir = match (dir.parent(), dir.file_name()) {
        (Some(parent), Some(name)) => parent
            .canonicalize()
            .map(|p| p.join(name))
            .unwrap_or(dir.clone()),
        _ => dir,
    };
    pathdiff::diff_paths(&target, &dir).unwrap_or(target)
}

fn write(path: &Path, text: &str) -> Result<(), ExpectedError> {
    if let Some(parent) = path.parent() {
        std::fs::create_dir_all(parent).map_err(|e| {
            ExpectedError::Incomplete(format!("new: cannot create {}: {e}", parent.display()))
        })?;
    }
    std::fs::write(path, text).map_err(|e| {
        ExpectedError::Incomplete(format!("new: cannot write {}: {e}", path.display()))
    })
}
