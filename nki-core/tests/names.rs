//! NKI 0.7's `name=` on instructions, as `nisa::named(name, || ...)`: the records of the
//! instructions (and `nl` calls) issued inside carry the name into the profile's op rows and
//! the Chrome trace; errors raised by their checks name it; nothing else changes.

use nki_core::nisa::AluOp;
use nki_core::prelude::*;

/// A load, a named add, a nested pair of names around a multiply and an `nl` call, and an
/// unnamed store.
fn body(x: &Hbm<f32>, o: &HbmOut<'_, f32>, names: bool) {
    let t = nl::ndarray(&[4, 8], DType::F32, nl::sbuf);
    nisa::dma_copy(&t, x, None);
    let (s, m) = (
        nl::ndarray(&[4, 8], DType::F32, nl::sbuf),
        nl::ndarray(&[4, 8], DType::F32, nl::sbuf),
    );
    let add = || nisa::tensor_tensor(&s, &t, &t, AluOp::Add, None);
    let mul = || nisa::tensor_tensor(&m, &s, &t, AluOp::Multiply, None);
    let cube = || nl::multiply(&m, &t);
    let c = if names {
        nisa::named("double", || {
            add();
            nisa::named("times_x", mul);
            // Back to the outer name after the inner closure.
            cube()
        })
    } else {
        add();
        mul();
        cube()
    };
    nisa::dma_copy(o.view(), &c, None);
}

fn profile(names: bool) -> (Profile, Vec<f32>) {
    let x = Hbm::from_vec(&[4, 8], (0..32).map(|k| k as f32).collect()).unwrap();
    let mut out = Hbm::<f32>::zeros([4, 8]);
    let o = out.as_output();
    let p = Launch::new(1)
        .mode(Mode::Simulate)
        .run(|| body(&x, &o, names))
        .unwrap()
        .profile
        .unwrap();
    (p, out.to_f32_vec().unwrap())
}

#[test]
fn named_instructions_carry_their_name_into_the_profile_and_trace() {
    let (p, values) = profile(true);
    let names: Vec<(&str, Option<&str>)> = p
        .ops
        .iter()
        .map(|o| (o.api, o.name.map(|n| n.as_str())))
        .collect();
    assert_eq!(
        names,
        [
            ("nisa.dma_copy", None),
            ("nisa.tensor_tensor", Some("double")),
            ("nisa.tensor_tensor", Some("times_x")),
            ("nl.multiply", Some("double")),
            ("nisa.dma_copy", None),
        ],
        "{:?}",
        p.ops
    );
    // Names change nothing else: the same values and the same modelled time as unnamed.
    let (plain, plain_values) = profile(false);
    assert_eq!(values, plain_values);
    assert!(plain.ops.iter().all(|o| o.name.is_none()));
    assert_eq!(p.latency_ns, plain.latency_ns);
    let want: Vec<f32> = (0..32).map(|k| (2 * k * k * k) as f32).collect();
    assert_eq!(values, want);

    // The trace's event for a named instruction is called by its name, with it in its args.
    let path = std::env::temp_dir().join(format!("nki_names_{}.json", std::process::id()));
    p.write_chrome_trace(&path).unwrap();
    let trace = std::fs::read_to_string(&path).unwrap();
    let _ = std::fs::remove_file(&path);
    let json: serde_json::Value = serde_json::from_str(&trace).unwrap();
    let events = json["traceEvents"].as_array().unwrap();
    let named: Vec<&str> = events
        .iter()
        .filter(|e| e["ph"] == "X" && e["cat"] != "stall" && e["cat"] != "launch")
        .filter_map(|e| e["args"]["name"].as_str().map(|n| (e, n)))
        .map(|(e, n)| {
            assert_eq!(e["name"], n, "{e}");
            n
        })
        .collect();
    assert!(
        named.contains(&"double") && named.contains(&"times_x"),
        "{named:?}"
    );
}

#[test]
fn errors_of_a_named_instruction_name_it() {
    let e = Launch::new(1)
        .run(|| {
            let (a, b) = (
                nl::ndarray(&[4, 8], DType::F32, nl::sbuf),
                nl::ndarray(&[4, 6], DType::F32, nl::sbuf),
            );
            nisa::memset(&a, 1.0, None);
            nisa::memset(&b, 1.0, None);
            nisa::named("bad_add", || {
                nisa::tensor_tensor(&a, &a, &b, AluOp::Add, None)
            });
        })
        .unwrap_err();
    assert_eq!(e.op(), "nisa.tensor_tensor", "{e}");
    assert!(e.message().contains("(instruction 'bad_add')"), "{e}");
}
