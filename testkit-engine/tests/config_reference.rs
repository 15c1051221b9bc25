//! The book's `testkit.toml` reference (`book/src/testkit-toml.md`) lists
//! every key of `testkit.toml`, and only those: the keys of each table are
//! read off the parser itself (the keys its error for an unknown key names
//! as expected), and compared with the page's.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use testkit_engine::config::SuiteConfig;
use testkit_engine::resource::Kinds;

/// Each table of the page (`""` for the top level, `auth.login`,
/// `resources.<kind>.gone_if`) and the keys its rows list.
fn documented() -> BTreeMap<String, BTreeSet<String>> {
    let page = Path::new(env!("CARGO_MANIFEST_DIR")).join("../book/src/testkit-toml.md");
    let text = std::fs::read_to_string(&page)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", page.display()));
    let mut tables: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut table: Option<String> = None;
    for line in text.lines() {
        if let Some(heading) = line
            .strip_prefix("## ")
            .or_else(|| line.strip_prefix("### "))
        {
            let name = heading.trim().trim_matches('`');
            table = Some(match name {
                "Top level" => String::new(),
                "[pod] bootstrap" => "pod.bootstrap".to_owned(),
                "gone_if" | "names" => format!("resources.<kind>.{name}"),
                _ => name
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .to_owned(),
            });
            continue;
        }
        let Some(table) = &table else { continue };
        if let Some(row) = line.strip_prefix("| `") {
            let key = row.split('`').next().unwrap_or_default();
            tables
                .entry(table.clone())
                .or_default()
                .insert(key.to_owned());
        }
    }
    tables
}

/// The keys the parser expects in a table: what its error for the key
/// `zz_not_a_key` put there says it expected.
fn accepted(table: &str) -> BTreeSet<String> {
    let text = match table {
        "" => "zz_not_a_key = 1\n".to_owned(),
        "resources.<kind>" => "[resources.k]\nzz_not_a_key = 1\n".to_owned(),
        "resources.<kind>.gone_if" => "[resources.k]\ngone_if = { zz_not_a_key = 1 }\n".to_owned(),
        "resources.<kind>.names" => "[resources.k]\nnames = { zz_not_a_key = 1 }\n".to_owned(),
        "witnesses.<name>" => "[witnesses.w]\nzz_not_a_key = 1\n".to_owned(),
        "pod.container.mounts" => "[pod.container]\nmounts = [{ zz_not_a_key = 1 }]\n".to_owned(),
        "pod.container.nodes.<name>" => "[pod.container.nodes.n]\nzz_not_a_key = 1\n".to_owned(),
        "pod.vm.fields.<name>" => "[pod.vm.fields.n]\nzz_not_a_key = 1\n".to_owned(),
        "pod.bootstrap" => "[pod]\nbootstrap = [{ zz_not_a_key = 1 }]\n".to_owned(),
        _ => format!("[{table}]\nzz_not_a_key = 1\n"),
    };
    let path = Path::new("/suite/testkit.toml");
    let error = match SuiteConfig::parse(&text, path) {
        Err(e) => e.to_string(),
        Ok(config) => match Kinds::from_config(&config, path) {
            Err(e) => e.to_string(),
            Ok(_) => panic!("[{table}] took an unknown key:\n{text}"),
        },
    };
    let expected = error
        .split("unknown field `zz_not_a_key`, expected ")
        .nth(1)
        .unwrap_or_else(|| panic!("[{table}]: no list of keys in {error:?}"));
    // "one of `a`, `b`, `c`", "`a` or `b`", "`a`": every quoted key, up
    // to the end of the list.
    let list = expected
        .split(&['\n', ' '][..])
        .take_while(|w| w.starts_with('`') || *w == "one" || *w == "of" || *w == "or");
    list.filter_map(|w| w.split('`').nth(1))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_reference_lists_every_key_the_parser_takes_and_no_other() {
    let documented = documented();
    let tables = [
        "",
        "suite",
        "pod",
        "pod.container",
        "pod.container.build",
        "pod.container.mounts",
        "pod.container.nodes.<name>",
        "pod.vm",
        "pod.vm.fields.<name>",
        "pod.vm.binaries",
        "pod.bootstrap",
        "auth",
        "auth.login",
        "capabilities",
        "cli",
        "resources.<kind>",
        "resources.<kind>.gone_if",
        "resources.<kind>.names",
        "witnesses.<name>",
    ];
    let mut wrong = Vec::new();
    for table in tables {
        let parsed = accepted(table);
        let listed = documented.get(table).cloned().unwrap_or_default();
        let missing: Vec<_> = parsed.difference(&listed).collect();
        let extra: Vec<_> = listed.difference(&parsed).collect();
        if !missing.is_empty() || !extra.is_empty() {
            wrong.push(format!(
                "[{table}]: the parser takes {missing:?} that book/src/testkit-toml.md does not list; \
                 the page lists {extra:?} that the parser refuses"
            ));
        }
    }
    let unknown: Vec<_> = documented
        .keys()
        .filter(|t| !tables.contains(&t.as_str()))
        .collect();
    assert!(
        unknown.is_empty(),
        "book/src/testkit-toml.md has tables this test does not check: {unknown:?}"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
