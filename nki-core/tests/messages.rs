//! Issue 20 item 5: error messages state true facts and name the op the user called.

use nki_core::prelude::*;

#[test]
fn an_empty_slice_is_called_empty_not_out_of_bounds() {
    let a = Hbm::<f32>::zeros([128, 4]);
    let line = line!() + 3;
    let e = Launch::new(1)
        .run(|| {
            let _ = nl::load(a.slice((5..5, ..)));
        })
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("the range 5..5 on dimension 0"), "{e}");
    assert!(e.message().contains("is empty"), "{e}");
    assert!(!e.message().contains("exceeds"), "{e}");
    assert_eq!(e.location().unwrap().line, line, "{e}");
    // A range past the end still names the last index it reaches.
    let e = Launch::new(1)
        .run(|| {
            let _ = nl::load(a.slice((120..130, ..)));
        })
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::OutOfBounds, "{e}");
    assert!(e.message().contains("[120, 129]"), "{e}");
}

#[test]
fn an_empty_access_pattern_is_called_empty() {
    let a = Hbm::<f32>::zeros([4, 8]);
    let e = Launch::new(1)
        .run(|| {
            let _ = nl::load(a.view().ap(&[[8, 4], [1, 0]], 0));
        })
        .map(|_| ())
        .unwrap_err();
    assert_eq!(e.kind(), ErrorKind::InvalidArgument, "{e}");
    assert!(e.message().contains("count of 0"), "{e}");
    assert!(!e.message().contains("reaches element"), "{e}");
}

#[test]
fn reshape_errors_name_reshape() {
    let a = Hbm::<f32>::zeros([4, 8]);
    for dims in [&[0usize, 32][..], &[1, 1, 1, 1, 1, 32]] {
        let e = Launch::new(1)
            .run(|| {
                let _ = nl::load(a.reshape(dims));
            })
            .map(|_| ())
            .unwrap_err();
        assert_eq!(e.op(), "reshape", "{e}");
    }
}
