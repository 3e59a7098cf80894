use super::parquet_file::{Col, Dictionaries, Part, shares};

#[test]
fn a_text_column_null_in_every_row_group_is_read_plain_and_others_as_dictionaries() {
    use std::sync::Arc;

    use arrow_array::cast::AsArray;
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use arrow_schema::DataType;
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let column = |v: [Option<&str>; 3]| Arc::new(StringArray::from(v.to_vec())) as ArrayRef;
    let batch = |half: [Option<&str>; 3]| {
        RecordBatch::try_from_iter(vec![
            ("Empty", column([None; 3])),
            ("Half", column(half)),
            ("Full", column([Some("a"), Some("b"), Some("a")])),
        ])
        .unwrap()
    };
    let (first, second) = (batch([None; 3]), batch([None, Some("x"), Some("y")]));
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(3))
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, first.schema(), Some(props)).unwrap();
    w.write(&first).unwrap();
    w.write(&second).unwrap();
    w.close().unwrap();
    let bytes = bytes::Bytes::from(out);
    let meta = super::parquet_metadata(&bytes).unwrap();
    assert_eq!(meta.metadata().num_row_groups(), 2);
    let types: Vec<DataType> = meta
        .schema()
        .fields()
        .iter()
        .map(|f| f.data_type().clone())
        .collect();
    let dict = DataType::Dictionary(Box::new(DataType::Int32), Box::new(DataType::Utf8));
    assert_eq!(types, [DataType::Utf8, dict.clone(), dict]);
    let read: Vec<RecordBatch> = ParquetRecordBatchReaderBuilder::new_with_metadata(bytes, meta)
        .build()
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let half: Vec<Option<String>> = read
        .iter()
        .flat_map(|b| {
            let d = b.column(1).as_dictionary::<arrow_array::types::Int32Type>();
            let values = d.values().as_string::<i32>();
            d.keys()
                .iter()
                .map(|k| k.map(|k| values.value(k as usize).to_owned()))
                .collect::<Vec<_>>()
        })
        .collect();
    assert_eq!(
        half,
        [None, None, None, None, Some("x".into()), Some("y".into())]
    );
    assert!(
        read.iter()
            .all(|b| b.column(0).null_count() == b.num_rows())
    );
}

#[test]
fn batches_of_one_row_group_share_an_epoch_and_equal_text_shares_a_key() {
    use std::sync::Arc;

    use arrow_array::builder::{MapBuilder, StringBuilder};
    use arrow_array::{ArrayRef, RecordBatch, StringArray};
    use parquet::arrow::ArrowWriter;
    use parquet::arrow::arrow_reader::ParquetRecordBatchReaderBuilder;

    let teams = ["ml", "research", "ml", "ml", "research", "infra"];
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for team in teams {
        tags.keys().append_value("team");
        tags.values().append_value(team);
        tags.append(true).unwrap();
    }
    let batch = RecordBatch::try_from_iter(vec![
        (
            "Region",
            Arc::new(StringArray::from(vec![
                Some("us-east-1"),
                Some("eu-west-1"),
                Some("us-east-1"),
                None,
                Some("us-east-1"),
                Some("eu-west-1"),
            ])) as ArrayRef,
        ),
        ("Tags", Arc::new(tags.finish()) as ArrayRef),
    ])
    .unwrap();
    let props = parquet::file::properties::WriterProperties::builder()
        .set_max_row_group_row_count(Some(4))
        .build();
    let mut out = Vec::new();
    let mut w = ArrowWriter::try_new(&mut out, batch.schema(), Some(props)).unwrap();
    w.write(&batch).unwrap();
    w.close().unwrap();
    let bytes = bytes::Bytes::from(out);
    let meta = super::parquet_metadata(&bytes).unwrap();
    let mut rows = Vec::new();
    for group in 0..2 {
        let reader =
            ParquetRecordBatchReaderBuilder::new_with_metadata(bytes.clone(), meta.clone())
                .with_row_groups(vec![group])
                .with_batch_size(2)
                .build()
                .unwrap();
        let mut dictionaries = Dictionaries::default();
        for b in reader {
            let b = b.unwrap();
            let cols: Vec<Col<'_>> = b.columns().iter().map(|a| Col::of(a).unwrap()).collect();
            let epoch = dictionaries.epoch(&cols);
            let batch = super::Batch {
                cols,
                rows: b.num_rows(),
                serial: 0,
                epoch,
            };
            let mut regions = Vec::new();
            let bound = batch.ids(0, &mut regions).unwrap();
            assert!(regions.iter().all(|&id| id < bound), "{regions:?} {bound}");
            let tags = batch.map_ids(1).unwrap();
            let values = tags.value_count().unwrap();
            for (row, region) in regions.into_iter().enumerate() {
                let (key, team) = tags.row(row).unwrap().next().unwrap();
                assert_eq!(tags.key_text(key), Some("team"));
                let team = team.unwrap();
                assert!(team < values);
                assert_eq!(tags.value_text(team), Some(teams[rows.len()]));
                rows.push((epoch, region, team));
            }
        }
    }
    // Rows 0-3 are one row group read in two batches, rows 4-5 another.
    let epochs: Vec<u64> = rows.iter().map(|r| r.0).collect();
    assert!(epochs[..4].iter().all(|e| *e == epochs[0]), "{rows:?}");
    assert!(
        epochs[4..]
            .iter()
            .all(|e| *e == epochs[4] && *e != epochs[0])
    );
    let (region, team): (Vec<u32>, Vec<u32>) = rows.iter().map(|r| (r.1, r.2)).unzip();
    // Equal text, equal key; a null region is 0.
    assert_eq!(region[0], region[2]);
    assert_ne!(region[0], region[1]);
    assert_eq!(region[3], 0);
    assert_ne!(region[0], 0);
    assert_eq!((team[0], team[2], team[3]), (team[0], team[0], team[0]));
    assert_ne!(team[0], team[1]);
    assert_ne!(team[4], team[5]);
}

#[test]
fn shares_are_equal_runs_cut_along_row_groups() {
    let part = |group, skip, rows, line| Part {
        group,
        skip,
        rows,
        line,
    };
    // 5 groups, 23 rows: the cut at row 11 falls inside the third group.
    let s = shares(&[5, 5, 5, 5, 3], 2);
    assert_eq!(
        s,
        vec![
            vec![part(0, 0, 5, 1), part(1, 0, 5, 6), part(2, 0, 1, 11)],
            vec![part(2, 1, 4, 12), part(3, 0, 5, 16), part(4, 0, 3, 21)],
        ]
    );
    // Fewer rows than workers: a worker may have none; no row is lost.
    let s = shares(&[1], 2);
    assert_eq!(s, vec![vec![], vec![part(0, 0, 1, 1)]]);
    assert_eq!(shares(&[], 2), vec![Vec::<Part>::new(), vec![]]);
}
