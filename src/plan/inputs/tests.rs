use super::*;

proptest::proptest! {
    /// Demand and usage CSV: hours or an error naming file and line.
    #[test]
    fn any_demand_csv_parses_or_names_file_and_line(
        text in "\\PC{0,200}",
        rows in proptest::collection::vec((proptest::num::i64::ANY, "\\PC{0,12}", "\\PC{0,6}"), 0..8),
        by_time in proptest::bool::ANY,
        two in proptest::bool::ANY,
    ) {
        let header = match (by_time, two) {
            (true, false) => "timestamp,gpus",
            (false, false) => "hour,gpus",
            (true, true) => "timestamp,train,infer",
            (false, true) => "hour,train,infer",
        };
        let structured = rows.iter().fold(format!("{header}\n"), |acc, (h, g, i)| {
            if two { format!("{acc}{h},{g},{i}\n") } else { format!("{acc}{h},{g}\n") }
        });
        for t in [text.clone(), structured] {
            match parse_demand_table("d.csv", &t) {
                Ok(d) => {
                    let sound = d.columns.iter().all(|(_, c)| {
                        !c.is_empty() && c.iter().all(|g| (0.0..=MAX_DEMAND_PER_HOUR).contains(g))
                    });
                    proptest::prop_assert!(sound);
                }
                Err(e) => proptest::prop_assert!(e.to_string().starts_with("d.csv:"), "{e}"),
            }
        }
    }

    /// Owned CSV: entries or an error naming file and line.
    #[test]
    fn any_owned_csv_parses_or_names_file_and_line(text in "\\PC{0,200}", cells in proptest::collection::vec("[a-z0-9./_-]{0,8}", 0..12)) {
        let structured = format!("offer,option,count,remaining_hours\n{}\n", cells.join(","));
        for t in [text.clone(), structured] {
            if let Err(e) = parse_owned("o.csv", &t) {
                proptest::prop_assert!(e.to_string().starts_with("o.csv:"), "{e}");
            }
        }
    }
}

#[test]
fn hours_or_timestamps_give_the_series() {
    let d = parse_demand("d.csv", "hour,gpus\n0,8\n1,16\n2,0\n").unwrap();
    assert_eq!((d.gpus, d.start), (vec![8.0, 16.0, 0.0], None));
    let d = parse_demand(
        "d.csv",
        "# forecast\ntimestamp,gpus\n2026-12-01T00:00:00Z,4\n2026-12-01 01:00,5.5\n",
    )
    .unwrap();
    assert_eq!(d.gpus, vec![4.0, 5.5]);
    assert_eq!(d.start.unwrap().to_rfc3339(), "2026-12-01T00:00:00+00:00");
}

#[test]
fn bad_rows_name_their_line() {
    let err = |text: &str| parse_demand("d.csv", text).unwrap_err();
    assert_eq!(err("hours,gpus\n0,1\n").line, 1);
    assert_eq!(err("hour,gpus\n0,1\n1,-2\n").line, 3);
    assert_eq!(err("hour,gpus\n0,1\n2,1\n").line, 3);
    assert_eq!(err("hour,gpus\n0,1,2\n").line, 2);
    assert!(
        err("timestamp,gpus\nyesterday,1\n")
            .to_string()
            .starts_with("d.csv:2: timestamp `yesterday`")
    );
    assert_eq!(err("hour,gpus\n").line, 1);
    // A usage file has one column.
    assert!(
        err("hour,a,b\n0,1,2\n")
            .message
            .contains("2 demand columns")
    );
}

#[test]
fn several_columns_are_several_classes_described_by_the_classes_file() {
    let table = parse_demand_table("d.csv", "hour,train,infer\n0,3,2\n1,3,4\n").unwrap();
    assert_eq!(table.columns[1], ("infer".to_owned(), vec![2.0, 4.0]));
    let err = |r: Result<Vec<DemandClass>, InputError>| r.unwrap_err().to_string();
    // Without a classes file only one column is allowed.
    assert!(err(demand_classes(table.clone(), "d.csv", None)).contains("--classes"));
    let dir = tempfile::tempdir().unwrap();
    let toml = dir.path().join("classes.toml");
    std::fs::write(
        &toml,
        "[classes.train]\nperf = { \"H100-80GB\" = 1.0, \"A100-80GB\" = 0.5 }\nmax_spot_share = 0.3\n\
         [classes.infer]\ngpu_models = [\"L4\", \"H100-80GB\"]\n",
    )
    .unwrap();
    let specs = read_classes(&toml).unwrap();
    let classes = demand_classes(table.clone(), "d.csv", Some(("classes.toml", &specs))).unwrap();
    assert_eq!(classes[0].id, "train");
    assert_eq!(classes[0].demand, vec![3.0, 3.0]);
    assert_eq!(classes[0].perf.as_ref().unwrap()["A100-80GB"], 0.5);
    assert_eq!(classes[0].max_spot_share, Some(Some(0.3)));
    assert_eq!(classes[1].gpu_models.as_ref().unwrap().len(), 2);
    // The same in JSON.
    let json = dir.path().join("classes.json");
    std::fs::write(
        &json,
        r#"{"classes": {"train": {}, "infer": {"perf": {"L4": 0.2}}}}"#,
    )
    .unwrap();
    let specs = read_classes(&json).unwrap();
    assert!(demand_classes(table.clone(), "d.csv", Some(("classes.json", &specs))).is_ok());
    // A column without a class, a class without a column, a bad setting.
    let specs = vec![("train".to_owned(), Map::new())];
    assert!(
        err(demand_classes(
            table.clone(),
            "d.csv",
            Some(("c.toml", &specs))
        ))
        .starts_with("d.csv:1: column `infer` is not a class of c.toml")
    );
    let mut specs = vec![
        ("train".to_owned(), Map::new()),
        ("infer".to_owned(), Map::new()),
    ];
    specs.push(("batch".to_owned(), Map::new()));
    assert!(
        err(demand_classes(
            table.clone(),
            "d.csv",
            Some(("c.toml", &specs))
        ))
        .contains("class `batch` has no column in d.csv")
    );
    let mut bad = Map::new();
    bad.insert("perf".to_owned(), json!({"L4": -1}));
    let specs = vec![("train".to_owned(), bad), ("infer".to_owned(), Map::new())];
    assert!(
        err(demand_classes(table, "d.csv", Some(("c.toml", &specs))))
            .starts_with("c.toml:0: classes.train.perf.L4")
    );
    std::fs::write(&toml, "[klasses.train]\n").unwrap();
    assert!(read_classes(&toml).unwrap_err().message.contains("klasses"));
}

#[test]
fn owned_rows_name_the_offer_either_way_and_bad_cells_their_line() {
    let owned = parse_owned(
        "o.csv",
        "offer,option,count,remaining_hours\naws/us-east-1/p5.48xlarge,reserved_1y_no_upfront-standard,2,5000\n",
    )
    .unwrap();
    assert_eq!(owned[0].offer, "aws/us-east-1/p5.48xlarge");
    assert_eq!(owned[0].remaining_hours, Some(5000));
    let owned = parse_owned(
        "o.csv",
        "provider,region,instance_type,option,count,remaining_hours\ngcp,us-central1,a2-highgpu-1g,commit_1y,6,\n",
    )
    .unwrap();
    assert_eq!(owned[0].offer, "gcp/us-central1/a2-highgpu-1g");
    assert_eq!(owned[0].remaining_hours, None);
    let err = |text: &str| parse_owned("o.csv", text).unwrap_err().to_string();
    assert!(err("offer,option,cnt\n").starts_with("o.csv:1: unknown column `cnt`"));
    assert!(err("offer,option,count\na/b/c,1y,x\n").starts_with("o.csv:2: count `x`"));
    assert!(err("offer,option,count\na/b/c,1y,-1\n").starts_with("o.csv:2: `count` -1"));
    assert!(
        err("offer,option,count,remaining_hours\na/b/c,1y,1,1.5\n")
            .starts_with("o.csv:2: remaining_hours")
    );
    assert!(err("option,count\n1y,1\n").starts_with("o.csv:2: name the offer"));
    assert!(err("offer,option,count\na/b/c,,1\n").starts_with("o.csv:2: `option`"));
}

#[test]
fn the_examples_the_readme_plans_with_parse() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/examples");
    let classes = read_catalog_classes(
        &dir.join("two-classes.csv"),
        Some(&dir.join("classes.toml")),
    )
    .unwrap();
    assert_eq!(
        classes.iter().map(|c| c.id.as_str()).collect::<Vec<_>>(),
        ["train", "infer"]
    );
    assert_eq!(classes[0].demand.len(), 48);
    let owned = read_owned(&dir.join("owned.csv")).unwrap();
    assert_eq!(owned[0].offer, "file:sheet/us-east-1/p5.48xlarge");
}
