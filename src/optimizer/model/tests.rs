use serde_json::json;

use super::*;

use proptest::prelude::*;

/// Any JSON value, nested a few levels.
fn any_json() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_map(|x| json!(x)),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 32, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    Just("demand".to_owned()),
                    Just("offers".to_owned()),
                    Just("policy".to_owned()),
                    Just("id".to_owned()),
                    Just("gpus_per_instance".to_owned()),
                    Just("reserved".to_owned()),
                    Just("term_hours".to_owned()),
                    Just("max_spot_share".to_owned()),
                    Just("classes".to_owned()),
                    Just("owned".to_owned()),
                    Just("perf".to_owned()),
                    Just("offer".to_owned()),
                    Just("option".to_owned()),
                    Just("count".to_owned()),
                    Just("remaining_hours".to_owned()),
                    Just("spot_price".to_owned()),
                    "[a-z_]{1,8}",
                ],
                inner,
                0..6,
            )
            .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A valid problem with random offers, prices, caps and policy filters.
fn any_problem() -> impl Strategy<Value = Problem> {
    let names = || prop::sample::select(vec!["aws", "azure", "gcp"]);
    let offer = (
        names(),
        prop::sample::select(vec!["r1", "r2"]),
        prop::sample::select(vec!["H100-80GB", "L4"]),
        1u32..=8,
        prop::option::of(0.5f64..50.0),
        prop::option::of((0.1f64..20.0, 0.0f64..1.0)),
        prop::option::of(0.0f64..10.0),
        prop::option::of((0.1f64..30.0, 0.0f64..5000.0)),
    )
        .prop_map(
            |(cloud, region, gpu, gpus, od, spot, cap, reserved)| Offer {
                id: String::new(),
                cloud: cloud.to_owned(),
                region: region.to_owned(),
                instance_type: format!("{gpu}x{gpus}"),
                gpu_model: gpu.to_owned(),
                gpu_form_factor: None,
                gpu_memory_gib: Some(if gpu == "L4" { 24.0 } else { 80.0 }),
                gpus_per_instance: f64::from(gpus),
                on_demand_price: od.or(Some(60.0)),
                spot_price: spot.map(|s| s.0).into(),
                spot_interruption_rate: spot.map_or(0.0, |s| s.1),
                spot_pool: format!("{cloud}/{region}"),
                max_spot_instances: cap,
                max_on_demand_instances: None,
                max_reserved_instances: cap,
                reserved: reserved
                    .map(|(h, up)| ReservedOption {
                        id: "1y".to_owned(),
                        term_hours: 8760.0,
                        hourly_price: h,
                        upfront: up,
                    })
                    .into_iter()
                    .collect(),
            },
        );
    let list = |items: Vec<&'static str>| {
        prop::option::of(prop::sample::subsequence(items, 0..=2))
            .prop_map(|l| l.map(|v| v.into_iter().map(str::to_owned).collect()))
    };
    (
        prop::collection::vec(offer, 1..5),
        prop::collection::vec(0.0f64..40.0, 1..6),
        prop::option::of(0.0f64..=1.0),
        list(vec!["aws", "azure", "gcp"]),
        list(vec!["r1", "r2"]),
        list(vec!["H100-80GB", "L4"]),
        prop::option::of(0.0f64..100.0),
    )
        .prop_map(
            |(mut offers, demand, share, clouds, regions, gpus, memory)| {
                for (i, o) in offers.iter_mut().enumerate() {
                    o.id = format!("o{i}");
                }
                Problem::v1(
                    Some("round trip".to_owned()),
                    demand,
                    offers,
                    Policy {
                        max_spot_share: share,
                        allowed_clouds: clouds,
                        allowed_regions: regions,
                        gpu_models: gpus,
                        min_gpu_memory_gib: memory,
                        ..Policy::default()
                    },
                )
            },
        )
}

/// The result document of `q`, without its wall-clock timings (they differ
/// from run to run).
fn solved(q: &Problem) -> Result<Value, String> {
    crate::optimizer::solve(q, &crate::optimizer::SolveOptions::default())
        .map(|r| {
            let mut doc = serde_json::to_value(r).unwrap();
            doc.as_object_mut().unwrap().remove("timings");
            doc
        })
        .map_err(|e| e.to_string())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// A saved problem is the problem: its document reads back equal, and
    /// solves to the same result.
    #[test]
    fn a_problem_survives_its_own_document(p in any_problem()) {
        let back = Problem::from_json(&p.to_json()).unwrap();
        prop_assert_eq!(&back, &p);
        prop_assert_eq!(solved(&back), solved(&p));
    }
}

proptest! {
    /// `POST /v1/plans` and `--problem` bodies: a problem or an error
    /// naming its field, never a panic.
    #[test]
    fn any_document_is_a_problem_or_an_error_naming_its_field(
        doc in any_json(),
        field in prop::sample::select(vec!["demand", "offers", "policy", "schema_version", "name"]),
        value in any_json(),
    ) {
        let mut mutated = base();
        mutated[field] = value;
        for d in [doc, mutated] {
            if let Err(e) = Problem::from_json(&d) {
                prop_assert!(!e.path.is_empty() && !e.message.is_empty(), "{e}");
            }
        }
    }
}

/// A valid version 2 problem: classes with filters, perf maps and share
/// overrides, owned entries, hourly spot prices with gaps.
fn any_v2_problem() -> impl Strategy<Value = Problem> {
    (
        any_problem(),
        prop::collection::vec(
            (
                prop::option::of(prop::sample::subsequence(vec!["H100-80GB", "L4"], 1..=2)),
                prop::option::of(0.1f64..2.0),
                prop::option::of(prop::option::of(0.0f64..=1.0)),
                prop::option::of(prop::sample::subsequence(vec!["aws", "gcp"], 0..=2)),
                0.0f64..30.0,
            ),
            1..4,
        ),
        prop::collection::vec((0usize..8, 0.0f64..5.0, prop::option::of(0u64..100)), 0..4),
        prop::collection::vec(prop::option::of(0.1f64..9.0), 0..4),
    )
        .prop_map(|(mut p, classes, owned, hourly)| {
            let hours = p.horizon();
            p.schema_version = 2;
            p.classes = classes
                .into_iter()
                .enumerate()
                .map(|(i, (models, factor, share, clouds, scale))| DemandClass {
                    id: format!("c{i}"),
                    demand: (0..hours)
                        .map(|t| ((t + i) as f64 * scale) % 17.0)
                        .collect(),
                    allowed_clouds: clouds.map(|l| l.into_iter().map(str::to_owned).collect()),
                    allowed_regions: None,
                    gpu_models: None,
                    min_gpu_memory_gib: None,
                    perf: models.map(|m| {
                        m.into_iter()
                            .map(|g| (g.to_owned(), factor.unwrap_or(1.0)))
                            .collect()
                    }),
                    perf_basis: None,
                    max_spot_share: share,
                    max_pool_share: None,
                })
                .collect();
            let offers = p.offers.len();
            for (k, price) in hourly.into_iter().enumerate() {
                if let (Some(o), Some(price)) = (p.offers.get_mut(k), price) {
                    o.spot_price = SpotPrice::Hourly(
                        (0..hours)
                            .map(|t| (t % 3 != 1).then_some(price * (1.0 + t as f64 / 10.0)))
                            .collect(),
                    );
                }
            }
            p.owned = owned
                .into_iter()
                .filter_map(|(k, count, remaining)| {
                    let o = &p.offers[k % offers];
                    let option = o.reserved.first()?;
                    Some(Owned {
                        offer: o.id.clone(),
                        option: option.id.clone(),
                        count: count.round(),
                        remaining_hours: remaining,
                    })
                })
                .collect();
            p
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    /// Version 2 documents read back equal, and solve the same.
    #[test]
    fn a_v2_problem_survives_its_own_document(p in any_v2_problem()) {
        let back = Problem::from_json(&p.to_json()).unwrap();
        prop_assert_eq!(&back, &p);
        let (a, b) = (solved(&back), solved(&p));
        prop_assert_eq!(&a, &b);
        if let Ok(doc) = &a {
            prop_assert!(crate::optimizer::verify(&p, doc, false).is_ok(), "{:?}", crate::optimizer::verify(&p, doc, false));
        }
    }

    /// Version 2 bodies with any value in any v2 place: a problem or an
    /// error naming its field.
    #[test]
    fn any_v2_document_is_a_problem_or_an_error_naming_its_field(
        field in prop::sample::select(vec!["classes", "owned", "demand"]),
        inner in prop::sample::select(vec!["id", "demand", "perf", "max_spot_share", "offer", "option", "count", "remaining_hours", "gpu_models"]),
        value in any_json(),
    ) {
        let mut doc = json!({"schema_version": 2,
            "classes": [{"id": "a", "demand": [1, 2], "perf": {"L4": 0.5}}],
            "offers": [{"id": "o", "cloud": "aws", "region": "r", "instance_type": "t", "gpu_model": "L4",
                        "gpus_per_instance": 1, "on_demand_price": 1.0, "spot_price": [0.5, null],
                        "reserved": [{"id": "1y", "term_hours": 8760}]}],
            "owned": [{"offer": "o", "option": "1y", "count": 1}]});
        let whole = value.clone();
        if field == "demand" {
            doc["demand"] = whole;
        } else {
            doc[field][0][inner] = value;
        }
        if let Err(e) = Problem::from_json(&doc) {
            prop_assert!(!e.path.is_empty() && !e.message.is_empty(), "{e}");
        }
    }
}

fn base() -> Value {
    json!({
        "schema_version": 1,
        "demand": [16, 16, 16],
        "offers": [{"id": "a", "cloud": "aws", "region": "us-east-1", "instance_type": "p5.48xlarge",
                    "gpu_model": "H100-80GB", "gpu_memory_gib": 80, "gpus_per_instance": 8,
                    "on_demand_price": 80.0, "note": "ignored",
                    "reserved": [{"id": "1y", "term_hours": 8760, "hourly_price": 25.0, "upfront": 219000.0}]}],
        "extra": "ignored"
    })
}

fn error_path(mutate: impl FnOnce(&mut Value)) -> String {
    let mut doc = base();
    mutate(&mut doc);
    Problem::from_json(&doc).unwrap_err().path
}

#[test]
fn a_valid_problem_parses_with_defaults() {
    let p = Problem::from_json(&base()).unwrap();
    assert_eq!(p.offers[0].spot_pool, "aws/us-east-1/p5.48xlarge");
    assert!((p.offers[0].reserved[0].effective_hourly() - 50.0).abs() < 1e-12);
    assert_eq!(p.policy, Policy::default());
}

#[test]
fn every_rule_of_the_schema_names_its_field() {
    assert_eq!(
        error_path(|d| d["schema_version"] = json!(4)),
        "schema_version"
    );
    assert_eq!(error_path(|d| d["demand"] = json!([])), "demand");
    assert_eq!(error_path(|d| d["demand"][1] = json!(-1)), "demand[1]");
    assert_eq!(error_path(|d| d["demand"][2] = json!("x")), "demand[2]");
    assert_eq!(error_path(|d| d["demand"][0] = json!(1e300)), "demand[0]");
    assert_eq!(
        error_path(|d| d["demand"] = json!(vec![1; MAX_HORIZON_HOURS + 1])),
        "demand"
    );
    assert_eq!(
        error_path(|d| {
            let o = d["offers"][0].clone();
            d["offers"] = (0..=MAX_OFFERS)
                .map(|i| {
                    let mut o = o.clone();
                    o["id"] = json!(format!("o{i}"));
                    o
                })
                .collect();
        }),
        "offers"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["gpus_per_instance"] = json!(true)),
        "offers[0].gpus_per_instance"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["gpus_per_instance"] = json!(-0.5)),
        "offers[0].gpus_per_instance"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["gpus_per_instance"] = json!(0)),
        "offers[0].gpus_per_instance"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["cloud"] = json!("")),
        "offers[0].cloud"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["on_demand_price"] = json!(-1)),
        "offers[0].on_demand_price"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["spot_interruption_rate"] = json!(1.5)),
        "offers[0].spot_interruption_rate"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["max_spot_instances"] = json!(-2)),
        "offers[0].max_spot_instances"
    );
    assert_eq!(
        error_path(|d| d["offers"][0]["reserved"][0]["term_hours"] = json!(0)),
        "offers[0].reserved[0].term_hours"
    );
    assert_eq!(
        error_path(|d| {
            let r = d["offers"][0]["reserved"][0].clone();
            d["offers"][0]["reserved"].as_array_mut().unwrap().push(r);
        }),
        "offers[0].reserved[1].id"
    );
    assert_eq!(
        error_path(|d| {
            let o = d["offers"][0].clone();
            d["offers"].as_array_mut().unwrap().push(o);
        }),
        "offers[1].id"
    );
    assert_eq!(
        error_path(|d| d["policy"] = json!({"max_spot_shar": 0.5})),
        "policy.max_spot_shar"
    );
    assert_eq!(
        error_path(|d| d["policy"] = json!({"max_pool_share": 1.5})),
        "policy.max_pool_share"
    );
    assert_eq!(
        error_path(|d| d["policy"] = json!({"budget": -1})),
        "policy.budget"
    );
    assert_eq!(
        error_path(|d| d["policy"] = json!({"integer_hourly": 1})),
        "policy.integer_hourly"
    );
}
