//! `NkiTensor.permute`, `squeeze_dim` and `flatten_dims` as views: the elements
//! they address, against index arithmetic on the row-major source.

use crate::helpers::arange;

#[test]
fn permute_reorders_dims_without_copying() {
    let (a, b, c) = (3usize, 4usize, 5usize);
    let t = arange(&[a, b, c]);
    let p = t.permute(&[2, 0, 1]).unwrap();
    assert_eq!(p.shape(), &[c, a, b]);
    let got = p.to_f32_vec();
    let want: Vec<f32> = (0..c).flat_map(|k| (0..a).flat_map(move |i| (0..b).map(move |j| (i * b * c + j * c + k) as f32))).collect();
    assert_eq!(got, want);
    assert!(t.permute(&[0, 0, 1]).is_err() && t.permute(&[0, 1]).is_err());
}

#[test]
fn squeeze_and_flatten_keep_the_elements_in_order() {
    let t = arange(&[2, 1, 3, 4]);
    let s = t.squeeze_dim(1).unwrap();
    assert_eq!(s.shape(), &[2, 3, 4]);
    assert_eq!(s.to_f32_vec(), t.to_f32_vec());
    assert!(t.squeeze_dim(2).is_err());
    let f = s.flatten_dims(1, 2).unwrap();
    assert_eq!(f.shape(), &[2, 12]);
    assert_eq!(f.to_f32_vec(), t.to_f32_vec());
    // A permuted pair of dims is not contiguous: merging them would change the order.
    let p = s.permute(&[0, 2, 1]).unwrap();
    let e = p.flatten_dims(1, 2).unwrap_err();
    assert!(e.to_string().contains("not contiguous"), "{e}");
}
