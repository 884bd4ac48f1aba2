//! Compile-fail tests: each user error is reported by the macro at the user's span.

#[test]
fn macro_errors_point_at_the_user_code() {
    trybuild::TestCases::new().compile_fail("tests/ui/*.rs");
}
