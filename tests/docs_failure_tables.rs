//! Every failure table in `docs/recipes/` names, row by row, the tests that prove it, and every
//! test it names exists (a promise without a test is not kept). A failure table is a
//! table under a heading that speaks of failures or faults; its last column is "tested by",
//! each cell holding one or more `file.rs::test_name` references to `tests/`, each naming a test
//! function (`#[test]` or `#[actix_rt::test]`), not a helper.

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

/// The failure tables of one document: (heading, header cells, rows of cells).
fn failure_tables(text: &str) -> Vec<(String, Vec<String>, Vec<Vec<String>>)> {
    let mut tables = Vec::new();
    let mut heading = String::new();
    let mut current: Option<(Vec<String>, Vec<Vec<String>>)> = None;
    let cells = |line: &str| line.trim().trim_matches('|').split('|').map(|c| c.trim().to_owned()).collect::<Vec<_>>();
    for line in text.lines().chain(std::iter::once("")) {
        if line.starts_with('|') {
            let is_failure = {
                let h = heading.to_lowercase();
                h.contains("failure") || h.contains("fault")
            };
            if !is_failure {
                continue;
            }
            match &mut current {
                None => current = Some((cells(line), Vec::new())),
                Some(_) if line.starts_with("|---") => {}
                Some((_, rows)) => rows.push(cells(line)),
            }
            continue;
        }
        if let Some((header, rows)) = current.take() {
            tables.push((heading.clone(), header, rows));
        }
        if line.starts_with('#') {
            heading = line.trim_start_matches('#').trim().to_owned();
        }
    }
    tables
}

/// `file.rs::name` references in a cell.
fn references(cell: &str) -> Vec<(String, String)> {
    cell.split('`')
        .filter_map(|part| {
            let (file, name) = part.split_once("::")?;
            (file.ends_with(".rs") && !name.is_empty() && name.chars().all(|c| c.is_alphanumeric() || c == '_'))
                .then(|| (file.to_owned(), name.to_owned()))
        })
        .collect()
}

/// What is wrong with a reference to `name` in a test file's `source`: there is no `fn name(`, or
/// the function is not a test (no `#[test]` or `#[actix_rt::test]` among the attributes and doc
/// comments right above it). `None` when `name` is a test function.
fn reference_problem(source: &str, name: &str) -> Option<&'static str> {
    let lines: Vec<&str> = source.lines().collect();
    let declaration = format!("fn {name}(");
    let mut declared = false;
    for (i, line) in lines.iter().enumerate() {
        let line = line.trim_start();
        let line = line.strip_prefix("pub ").unwrap_or(line);
        let line = line.strip_prefix("async ").unwrap_or(line);
        if !line.starts_with(&declaration) {
            continue;
        }
        declared = true;
        let mut above =
            lines[..i].iter().rev().map(|l| l.trim()).take_while(|l| l.starts_with("#[") || l.starts_with("//"));
        if above.any(|l| l.starts_with("#[test]") || l.starts_with("#[actix_rt::test]")) {
            return None;
        }
    }
    Some(if declared { "is not a test function" } else { "does not exist" })
}

#[test]
fn every_failure_table_row_names_tests_that_exist() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/recipes");
    let tests_dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let mut sources = BTreeMap::new();
    let mut problems = Vec::new();
    let mut checked = 0;
    let mut entries: Vec<_> = fs::read_dir(&docs).expect("docs/recipes").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for doc in entries {
        let name = doc.file_name().expect("name").to_string_lossy().into_owned();
        let text = fs::read_to_string(&doc).expect("doc");
        let tables = failure_tables(&text);
        if tables.is_empty() {
            problems.push(format!("{name}: no failure table (a heading with \"failure\" or \"fault\")"));
            continue;
        }
        for (heading, header, rows) in tables {
            let has_column = header.last().is_some_and(|h| h == "tested by");
            if !has_column {
                problems.push(format!("{name} / {heading}: the last column must be \"tested by\""));
                continue;
            }
            for row in rows {
                let cell = row.last().cloned().unwrap_or_default();
                let refs = references(&cell);
                if row.len() != header.len() || refs.is_empty() {
                    problems.push(format!("{name} / {}: no test named", row[0]));
                }
                for (file, test) in refs {
                    let source = sources
                        .entry(file.clone())
                        .or_insert_with(|| fs::read_to_string(tests_dir.join(&file)).unwrap_or_default());
                    if let Some(problem) = reference_problem(source.as_str(), &test) {
                        problems.push(format!("{name} / {}: `{file}::{test}` {problem}", row[0]));
                    }
                    checked += 1;
                }
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(checked > 0, "no test reference was checked");
}

/// The control: the check catches a row without a test, a reference to a missing test, and a
/// reference to a function that is not a test.
#[test]
fn the_table_check_sees_missing_and_unknown_tests() {
    let doc = "## What happens on each failure\n\n| fault | what | tested by |\n|---|---|---|\n| a | b | `lock.rs::exists_here` |\n| c | d | — |\n";
    let tables = failure_tables(doc);
    assert_eq!(tables.len(), 1);
    let (_, header, rows) = &tables[0];
    assert_eq!(header.last().map(String::as_str), Some("tested by"));
    assert_eq!(references(&rows[0][2]), vec![("lock.rs".to_owned(), "exists_here".to_owned())]);
    assert!(references(&rows[1][2]).is_empty(), "a row without a test must be seen");
    assert!(failure_tables("## Messages\n\n| a | b |\n|---|---|\n| c | d |\n").is_empty());

    let source = "/// A test.\n#[actix_rt::test]\n#[cfg(unix)]\nasync fn exists_here() {}\n\n#[test]\nfn plain_test() {}\n\n/// Not a test.\n#[cfg(unix)]\nfn helper(x: u8) {}\n#[test]\nfn calls_helper() {\n    helper(1);\n}\n";
    assert_eq!(reference_problem(source, "exists_here"), None);
    assert_eq!(reference_problem(source, "plain_test"), None);
    assert_eq!(reference_problem(source, "no_such_test"), Some("does not exist"), "a missing test must be seen");
    assert_eq!(reference_problem(source, "helper"), Some("is not a test function"), "a helper must be refused");
}

/// The cancellation rows every recipe's failure tables must have, by the first cell's words: a
/// dropped future, a stopped actor (or a stop), a closed session. The names of the kinds a
/// document's failure tables lack.
fn missing_cancellation_rows(text: &str) -> Vec<&'static str> {
    let firsts: Vec<String> = failure_tables(text)
        .into_iter()
        .flat_map(|(_, _, rows)| rows.into_iter().filter_map(|row| row.first().map(|c| c.to_lowercase())))
        .collect();
    type Kind = (&'static str, fn(&str) -> bool);
    let kinds: [Kind; 3] = [
        ("future dropped", |c| c.contains("dropped") && (c.contains("future") || c.contains("send("))),
        ("actor stopped", |c| c.contains("stopped") || c.contains("`stop")),
        ("session closed", |c| c.contains("session closed")),
    ];
    kinds.iter().filter(|(_, has)| !firsts.iter().any(|c| has(c))).map(|(kind, _)| *kind).collect()
}

#[test]
fn every_recipe_says_what_a_dropped_future_a_stopped_actor_and_a_closed_session_leave() {
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/recipes");
    let mut problems = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(&docs).expect("docs/recipes").map(|e| e.expect("entry").path()).collect();
    entries.sort();
    for doc in &entries {
        let missing = missing_cancellation_rows(&fs::read_to_string(doc).expect("doc"));
        if !missing.is_empty() {
            problems.push(format!("{}: no row for {missing:?}", doc.display()));
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    assert!(entries.len() >= 8, "the recipe documents were not found");
}

/// The control: a table without the three rows is caught, one with them passes.
#[test]
fn the_row_check_sees_a_missing_kind() {
    let head = "## Failures\n\n| failure | what | tested by |\n|---|---|---|\n";
    let none = format!("{head}| connection drops | x | `a.rs::b` |\n");
    assert_eq!(missing_cancellation_rows(&none), ["future dropped", "actor stopped", "session closed"]);
    let all = format!(
        "{head}| `acquire` future dropped | x | `a.rs::b` |\n| actor stopped | x | `a.rs::b` |\n| session closed | x | `a.rs::b` |\n"
    );
    assert!(missing_cancellation_rows(&all).is_empty());
}
