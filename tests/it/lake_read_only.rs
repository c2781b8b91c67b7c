//! Reading a lake creates nothing, takes no lock and needs no write access: every reading
//! command and the Rust API read a read-only copy of a lake (`chmod -R a-w`, and, where the
//! tests run as root and permissions do not stop writes, a run as another user), leaving every
//! file and folder as it was; and a folder that is not a lake is refused, not turned into one.

use crate::common;

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::SystemTime;

use common::lake::{bounded, write_all};
use dexlake::lake::sample::Samples;
use dexlake::lake::{Dataset, Lake};
use dexlake::prelude::{Bars, LakeQuery};

/// The user a command runs as to meet real permissions when this process runs as root.
const OTHER_USER: u32 = 65_534;

/// Every file and folder under `root` with its size and modification time.
fn tree(root: &Path) -> BTreeMap<PathBuf, (bool, u64, SystemTime)> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let meta = std::fs::metadata(&dir).expect("metadata");
        out.insert(dir.clone(), (true, 0, meta.modified().expect("mtime")));
        for entry in std::fs::read_dir(&dir).expect("read_dir") {
            let path = entry.expect("entry").path();
            let meta = std::fs::symlink_metadata(&path).expect("metadata");
            if meta.is_dir() {
                stack.push(path);
            } else {
                out.insert(path, (false, meta.len(), meta.modified().expect("mtime")));
            }
        }
    }
    out
}

/// Copies the folder `from` to `to`, leaving out the writer's lock file (a copied or downloaded
/// lake has none).
fn copy_lake(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).expect("create");
    for entry in std::fs::read_dir(from).expect("read_dir") {
        let entry = entry.expect("entry");
        let target = to.join(entry.file_name());
        if entry.file_type().expect("type").is_dir() {
            copy_lake(&entry.path(), &target);
        } else if entry.file_name() != "lock" {
            std::fs::copy(entry.path(), &target).expect("copy");
        }
    }
}

/// `chmod -R a-w` (`writable == false`) or `u+w` on the folder `root`.
fn set_writable(root: &Path, writable: bool) {
    for (path, (is_dir, _, _)) in tree(root) {
        let mode = match (is_dir, writable) {
            (true, false) => 0o555,
            (true, true) => 0o755,
            (false, false) => 0o444,
            (false, true) => 0o644,
        };
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    }
}

/// The entries of `after` that differ from `before` (added, removed or changed), for messages.
fn changes(
    before: &BTreeMap<PathBuf, (bool, u64, SystemTime)>,
    after: &BTreeMap<PathBuf, (bool, u64, SystemTime)>,
) -> Vec<PathBuf> {
    let mut paths: Vec<PathBuf> = before
        .keys()
        .chain(after.keys())
        .filter(|p| before.get(*p) != after.get(*p))
        .cloned()
        .collect();
    paths.dedup();
    paths
}

fn dexlake(lake: &Path, args: &[&str], user: Option<u32>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_dexlake"));
    cmd.arg("--lake").arg(lake).args(args);
    if let Some(uid) = user {
        cmd.uid(uid).gid(uid);
    }
    cmd.output().expect("the dexlake binary runs")
}

#[test]
fn reading_commands_read_a_read_only_lake_and_change_nothing() {
    bounded(300, || {
        let dir = tempfile::tempdir().expect("temp dir");
        // Others may enter the test's folder: the run as another user reads the lake there.
        std::fs::set_permissions(dir.path(), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let written = dir.path().join("written");
        let samples = Samples::generate(5, 300);
        let lake = Lake::open(&written).expect("open");
        write_all(&lake, &samples.batches().expect("batches"));
        let swaps = lake.row_count(Dataset::Swaps).expect("rows");
        drop(lake);
        let root = dir.path().join("read-only");
        copy_lake(&written, &root);
        let request = dir.path().join("request.json");
        std::fs::write(&request, r#"{"limit": 5}"#).expect("request");
        std::fs::set_permissions(&request, std::fs::Permissions::from_mode(0o644)).expect("chmod");
        set_writable(&root, false);
        // As root, permissions do not stop writes: then the commands also run as another
        // user, whom they do stop, and the tree is compared before and after either way.
        let writes_stopped = std::fs::File::create(root.join("probe")).is_err();
        if !writes_stopped {
            std::fs::remove_file(root.join("probe")).expect("remove the probe");
        }
        let other_user = !writes_stopped
            && dexlake(&root, &["schema", "swaps"], Some(OTHER_USER))
                .status
                .success();
        if !writes_stopped && !other_user {
            eprintln!(
                "writes are not stopped by permissions here and the binary cannot run as uid {OTHER_USER}: only checking that nothing changes"
            );
        }
        let before = tree(&root);

        let token = samples.swaps[0].token_address_out.clone();
        let wallet = samples.trades[0].wallet_address.clone();
        let trade_token = samples.trades[0].token_address.clone();
        let request = request.to_str().expect("UTF-8 path");
        let commands: [&[&str]; 6] = [
            &["ohlcv", "--token", &token, "--interval", "3600"],
            &["price-stats", "--tokens", &token],
            &["pnl", "--wallet", &wallet],
            &["token-metrics", "--token", &trade_token, "--window", "1d"],
            &["search", "--request", request],
            &["verify"],
        ];
        let users = if other_user {
            vec![None, Some(OTHER_USER)]
        } else {
            vec![None]
        };
        for user in users {
            for args in commands {
                let out = dexlake(&root, args, user);
                assert!(
                    out.status.success(),
                    "{args:?} as {user:?}: {}{}",
                    String::from_utf8_lossy(&out.stdout),
                    String::from_utf8_lossy(&out.stderr)
                );
                let changed = changes(&before, &tree(&root));
                assert!(
                    changed.is_empty(),
                    "{args:?} as {user:?} changed {changed:?}"
                );
            }
        }

        // The Rust API: open (for reading, and the writers' open), scan, query and verify.
        for lake in [
            Lake::open_existing(&root).expect("open a read-only lake for reading"),
            Lake::open(&root).expect("open a read-only lake"),
        ] {
            let scanned = lake
                .scan(Dataset::Swaps)
                .expect("scan")
                .collect()
                .expect("collect");
            assert_eq!(scanned.height() as u64, swaps);
            let bars = lake
                .query()
                .token(token.clone())
                .bars(Bars::every(3_600))
                .expect("bars");
            assert!(bars.height() > 0);
            assert!(lake.verify().expect("verify").is_ok());
        }
        let changed = changes(&before, &tree(&root));
        assert!(changed.is_empty(), "the Rust API changed {changed:?}");
        set_writable(&root, true);
    });
}

#[test]
fn reading_commands_refuse_a_folder_that_is_not_a_lake_and_create_nothing() {
    let dir = tempfile::tempdir().expect("temp dir");
    let empty = dir.path().join("empty");
    std::fs::create_dir(&empty).expect("folder");
    let other = dir.path().join("notes");
    std::fs::create_dir(&other).expect("folder");
    std::fs::write(other.join("readme.txt"), b"not a lake").expect("file");
    let missing = dir.path().join("missing");
    let request = dir.path().join("request.json");
    std::fs::write(&request, r#"{"limit": 5}"#).expect("request");
    let request = request.to_str().expect("UTF-8 path");
    let commands: [&[&str]; 8] = [
        &["ohlcv", "--token", "TOK", "--interval", "60"],
        &["price-stats", "--tokens", "TOK"],
        &["pnl", "--wallet", "W"],
        &["token-metrics", "--token", "TOK", "--window", "1d"],
        &["search", "--request", request],
        &["verify"],
        &["verify", "--repair"],
        &["compact"],
    ];
    for folder in [&empty, &other, &missing] {
        let before = folder.exists().then(|| tree(folder));
        let err = Lake::open_existing(folder)
            .expect_err("not a lake")
            .to_string();
        assert!(
            err.contains("not a dexlake lake") && err.contains(&folder.display().to_string()),
            "{err}"
        );
        assert!(Lake::repair(folder).is_err());
        for args in commands {
            let out = dexlake(folder, args, None);
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{args:?} on {folder:?}");
            assert!(
                stderr.contains("not a dexlake lake")
                    && stderr.contains(&folder.display().to_string())
                    && stderr.contains("dexlake sync"),
                "{args:?} on {folder:?}: {stderr}"
            );
            assert_eq!(
                folder.exists().then(|| tree(folder)),
                before,
                "{args:?} created something in {folder:?}"
            );
        }
    }
}
