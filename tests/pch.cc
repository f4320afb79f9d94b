/*
 * tests/pch.cc: the translation unit that builds the test programs' precompiled headers.
 *
 * What it is: nothing but an anchor. tests/CMakeLists.txt gives target tccl_test_pch the
 * headers the tests include (GoogleTest and the standard library); GCC compiles them once,
 * here, and every stage's shared test objects reuse the result (tccl_test_pch() in
 * tests/StageTests.cmake).
 *
 * Invariants: none of the precompiled headers depends on a macro that a test defines on its
 * command line (TCCL_STAGE and the like), so one precompiled header is valid for every stage.
 *
 * NCCL counterpart: none (build machinery).
 * Added in: foundation (tests/).
 */
