//! Toolchain discovery, the nvcc command, the object cache key and ptxas
//! summaries, against fake toolkits (a shell-script `nvcc`) and fake CUTLASS
//! trees in temporary folders.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use coda_codegen::{Toolchain, cache};

/// An empty scratch folder for one test.
fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("toolchain-test").join(name);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A toolkit root whose `nvcc --version` reports `release`.
fn fake_toolkit(dir: &Path, release: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let nvcc = dir.join("bin/nvcc");
    write(&nvcc, &format!("#!/bin/sh\necho 'Cuda compilation tools, release {release}, V{release}.1'\n"));
    std::fs::set_permissions(&nvcc, std::fs::Permissions::from_mode(0o755)).unwrap();
    write(&dir.join("lib/libcudart_static.a"), "");
    dir.to_path_buf()
}

fn fake_cutlass(dir: &Path) -> PathBuf {
    write(&dir.join("include/cutlass/cutlass.h"), "#pragma once\n");
    write(
        &dir.join("include/cutlass/version.h"),
        "#define CUTLASS_MAJOR 4\n#define CUTLASS_MINOR 2\n#define CUTLASS_PATCH 0\n",
    );
    write(&dir.join("tools/util/include/cutlass/util/packed_stride.hpp"), "#pragma once\n");
    dir.to_path_buf()
}

/// The environment `vars` as a lookup function.
fn env(vars: &[(&str, &Path)]) -> impl Fn(&str) -> Option<OsString> {
    let vars: Vec<(String, OsString)> = vars.iter().map(|(k, v)| (k.to_string(), v.as_os_str().to_owned())).collect();
    move |k| vars.iter().find(|(name, _)| name == k).map(|(_, v)| v.clone())
}

#[test]
fn the_toolkit_comes_from_the_first_source_that_names_one() {
    let dir = scratch("order");
    let [coda, build, cuda] = ["coda", "build", "cuda"].map(|n| fake_toolkit(&dir.join(n), "13.0"));
    let cutlass = fake_cutlass(&dir.join("cutlass"));
    let find = |builder: Option<&Path>, vars: &[(&str, &Path)]| {
        Toolchain::find_with(builder, Some(&cutlass), env(vars)).unwrap().cuda_home
    };
    assert_eq!(find(Some(&build), &[("CODA_CUDA_HOME", &coda), ("CUDA_HOME", &cuda)]), coda);
    assert_eq!(find(Some(&build), &[("CUDA_HOME", &cuda)]), build);
    assert_eq!(find(None, &[("CUDA_HOME", &cuda)]), cuda);
    // Without any, the per-user install location.
    let installed = dir.join("home/.cache/coda-rs/toolchain").join(coda_codegen::toolchain::pin_id());
    fake_toolkit(&installed.join("nvidia/cu13"), "13.0");
    fake_cutlass(&installed.join("cutlass_library/source"));
    let tc = Toolchain::find_with(None, None, env(&[("HOME", &dir.join("home"))])).unwrap();
    assert_eq!(
        (tc.cuda_home, tc.cutlass_home),
        (installed.join("nvidia/cu13"), installed.join("cutlass_library/source"))
    );
    let tc = Toolchain::find_with(None, None, env(&[("CODA_TOOLCHAIN_DIR", &installed)])).unwrap();
    assert_eq!(tc.cuda_home, installed.join("nvidia/cu13"));
    assert_eq!(tc.version().unwrap(), "nvcc V13.0.1, CUTLASS 4.2.0");
    // CUTLASS: the variable beats the builder.
    let other = fake_cutlass(&dir.join("cutlass2"));
    let tc = Toolchain::find_with(Some(&build), Some(&cutlass), env(&[("CODA_CUTLASS_HOME", &other)])).unwrap();
    assert_eq!(tc.cutlass_home, other);
}

#[test]
fn the_default_location_is_per_user() {
    assert_eq!(coda_codegen::toolchain::pin_id(), "cuda-13.0.88-cutlass-4.2.0");
    let home = Path::new("/home/u");
    let dir = cache::default_dir(env(&[("HOME", home)])).unwrap();
    assert_eq!(dir, Path::new("/home/u/.cache/coda-rs/kernels"));
    let dir = cache::default_dir(env(&[("HOME", home), ("XDG_CACHE_HOME", Path::new("/xdg"))])).unwrap();
    assert_eq!(dir, Path::new("/xdg/coda-rs/kernels"));
    let dir = cache::default_dir(env(&[("HOME", home), ("CODA_CACHE_DIR", Path::new("/c"))])).unwrap();
    assert_eq!(dir, Path::new("/c"));
}

#[test]
fn a_toolkit_that_is_not_cuda_13_is_refused() {
    let dir = scratch("cuda12");
    let old = fake_toolkit(&dir.join("cuda"), "12.4");
    let cutlass = fake_cutlass(&dir.join("cutlass"));
    let err = Toolchain::find_with(None, Some(&cutlass), env(&[("CODA_CUDA_HOME", &old)])).unwrap_err();
    assert!(err.contains("CODA_CUDA_HOME") && err.contains("is CUDA 12.4") && err.contains("needs CUDA 13.x"), "{err}");
    let err = Toolchain::find_with(None, Some(&cutlass), env(&[("CUDA_HOME", &old)])).unwrap_err();
    assert!(err.contains("CUDA_HOME = ") && err.contains("12.4"), "{err}");
}

#[test]
fn a_missing_toolchain_says_how_to_install_it() {
    let dir = scratch("missing");
    let err = Toolchain::find_with(None, None, env(&[("CODA_CUDA_HOME", &dir)])).unwrap_err();
    assert!(err.contains("CODA_CUDA_HOME") && err.contains("bash scripts/install-toolchain.sh"), "{err}");
    let err = Toolchain::find_with(None, None, env(&[("HOME", &dir)])).unwrap_err();
    assert!(err.contains("no CUDA toolchain found"), "{err}");
    for hint in [
        "bash scripts/install-toolchain.sh",
        "coda toolchain install",
        "CODA_CUDA_HOME",
        "CODA_CUTLASS_HOME",
        "nvidia-cuda-nvcc==13.0.88",
    ] {
        assert!(err.contains(hint), "{hint}: {err}");
    }
    let cuda = fake_toolkit(&dir.join("cuda"), "13.0");
    let err = Toolchain::find_with(None, Some(&dir), env(&[("CODA_CUDA_HOME", &cuda)])).unwrap_err();
    assert!(err.contains("CUTLASS not found") && err.contains("CODA_CUTLASS_HOME"), "{err}");
}

/// cc learns the compiler from the `Build`, not from `NVCC` in the process
/// environment, and nvcc gets host flags only behind `-Xcompiler`.
#[test]
fn cc_build_uses_the_toolkits_nvcc_without_touching_the_environment() {
    let dir = scratch("cc");
    let cuda = fake_toolkit(&dir.join("cuda"), "13.0");
    let cutlass = fake_cutlass(&dir.join("cutlass"));
    let tc = Toolchain::find_with(Some(&cuda), Some(&cutlass), env(&[])).unwrap();
    let before = std::env::var_os("NVCC");
    let tool = tc.cc_build().get_compiler();
    assert_eq!(std::env::var_os("NVCC"), before);
    assert_eq!(tool.path(), cuda.join("bin/nvcc"));
    let args: Vec<String> = tool.args().iter().map(|a| a.to_string_lossy().into_owned()).collect();
    for flag in coda_codegen::toolchain::NVCC_FLAGS {
        assert!(args.iter().any(|a| a == flag), "{flag} missing: {args:?}");
    }
    assert!(args.iter().any(|a| a.starts_with("-ccbin=")), "{args:?}");
    for d in tc.include_dirs() {
        assert!(args.windows(2).any(|w| w[0] == "-I" && Path::new(&w[1]) == d), "{} missing: {args:?}", d.display());
    }
    // Host flags that nvcc itself rejects (cc's gcc defaults) are not there.
    assert!(!args.iter().any(|a| ["-fPIC", "-ffunction-sections", "-m64"].contains(&a.as_str())), "{args:?}");
}

/// The key covers the compiler command and the contents of the include
/// trees, not where the trees or the compiler are.
#[test]
fn the_cache_key_covers_command_headers_and_nvcc() {
    let dir = scratch("key");
    let cutlass = fake_cutlass(&dir.join("cutlass"));
    let trees = [cutlass.join("include"), cutlass.join("tools/util/include")];
    let command = |extra: &[&str]| -> Vec<OsString> {
        let mut c: Vec<OsString> = ["nvcc", "-O3", "-I", trees[0].to_str().unwrap(), "-I", trees[1].to_str().unwrap()]
            .map(OsString::from)
            .into();
        c.extend(extra.iter().map(OsString::from));
        c
    };
    let fingerprint = |cmd: &[OsString], trees: &[PathBuf], nvcc: &str| cache::fingerprint(cmd, trees, nvcc, &[]).unwrap();
    let base = fingerprint(&command(&[]), &trees, "release 13.0, V13.0.88");
    assert_eq!(base, fingerprint(&command(&[]), &trees, "release 13.0, V13.0.88"));
    // CXXFLAGS and the like reach the key as arguments of the command.
    assert_ne!(base, fingerprint(&command(&["-DFROM_CXXFLAGS"]), &trees, "release 13.0, V13.0.88"));
    assert_ne!(base, fingerprint(&command(&[]), &trees, "release 13.0, V13.0.89"));
    assert_ne!(cache::key(&base, "a"), cache::key(&base, "b"));
    // Flags nvcc takes from its environment reach the key only where set.
    let env = |pairs: &[(&str, &str)]| cache::compiler_env(|k| pairs.iter().find(|(n, _)| *n == k).map(|(_, v)| OsString::from(v)));
    assert_eq!(env(&[("NVCC_APPEND_FLAGS", ""), ("PATH", "/bin")]), vec![]);
    let lineinfo = env(&[("NVCC_APPEND_FLAGS", "-lineinfo")]);
    assert_eq!(lineinfo, vec![("NVCC_APPEND_FLAGS".to_string(), "-lineinfo".to_string())]);
    assert_eq!(base, cache::fingerprint(&command(&[]), &trees, "release 13.0, V13.0.88", &[]).unwrap());
    assert_ne!(base, cache::fingerprint(&command(&[]), &trees, "release 13.0, V13.0.88", &lineinfo).unwrap());
    // One CUTLASS header changes.
    write(&cutlass.join("tools/util/include/cutlass/util/packed_stride.hpp"), "#pragma once\n// changed\n");
    let changed = fingerprint(&command(&[]), &trees, "release 13.0, V13.0.88");
    assert_ne!(base, changed);
    // The same contents elsewhere give the same key.
    std::fs::rename(&cutlass, dir.join("moved")).unwrap();
    let moved = [dir.join("moved/include"), dir.join("moved/tools/util/include")];
    let mut cmd = command(&[]);
    (cmd[3], cmd[5]) = (moved[0].clone().into(), moved[1].clone().into());
    assert_eq!(changed, fingerprint(&cmd, &moved, "release 13.0, V13.0.88"));
    // The same nvcc in another folder (another user's toolchain install).
    cmd[0] = "/home/someone/.cache/coda-rs/toolchain/cuda-13.0.88-cutlass-4.2.0/nvidia/cu13/bin/nvcc".into();
    assert_eq!(changed, fingerprint(&cmd, &moved, "release 13.0, V13.0.88"));
}

#[test]
fn writes_go_through_unique_temporary_names() {
    let dir = scratch("atomic");
    let path = dir.join("x.o");
    let (a, b) = (cache::temp_path(&path), cache::temp_path(&path));
    assert_ne!(a, b);
    assert_eq!(a.parent(), Some(dir.as_path()));
    cache::write_atomic(&path, "one").unwrap();
    cache::write_atomic(&path, "two").unwrap();
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1, "no temporary file is left");
}

/// A program no listed file defines any longer loses its generated table and
/// sources (else the macro would find the table of kernels no longer linked);
/// the listed programs' files, split configs included, and other files stay.
#[test]
fn generated_files_of_programs_gone_are_removed() {
    let dir = scratch("stale");
    for f in ["kept.rs", "kept.cu", "kept__pp_128x128_c1x2.cu", "gone.rs", "gone__coop_128x256_c1x1.cu", "notes.txt"] {
        write(&dir.join(f), "");
    }
    coda_codegen::build::remove_stale(&dir, &["kept"]).unwrap();
    let mut left: Vec<String> = std::fs::read_dir(&dir).unwrap().map(|e| e.unwrap().file_name().into_string().unwrap()).collect();
    left.sort();
    assert_eq!(left, ["kept.cu", "kept.rs", "kept__pp_128x128_c1x2.cu", "notes.txt"]);
}

/// A cache folder that cannot be written is found before any nvcc run.
#[test]
fn an_unwritable_cache_is_found_up_front() {
    let dir = scratch("writable");
    cache::writable_dir(&dir.join("made/here")).unwrap();
    assert!(dir.join("made/here").is_dir() && std::fs::read_dir(dir.join("made/here")).unwrap().next().is_none(), "the probe is removed");
    let file = dir.join("a-file");
    write(&file, "");
    assert!(cache::writable_dir(&file.join("below")).is_err());
}

#[test]
fn ptxas_output_is_summarized_in_one_line() {
    let stderr = "ptxas info    : 11 bytes gmem\n\
        ptxas info    : Compiling entry function '_ZN7cutlass13device_kernelIN4coda6KernelEEEvNT_6ParamsE' for 'sm_90a'\n\
        ptxas info    : Function properties for _ZN7cutlass13device_kernelIN4coda6KernelEEEvNT_6ParamsE\n    \
        1456 bytes stack frame, 828 bytes spill stores, 968 bytes spill loads\n\
        ptxas info    : Used 168 registers, used 2 barriers, 1456 bytes cumulative stack size, 1024 bytes smem\n\
        ptxas info    : Compile time = 1353.146 ms\n";
    assert_eq!(
        coda_codegen::build::ptxas_summary(stderr),
        "168 registers, 1456 bytes stack, 828 bytes spill stores, 968 bytes spill loads, 1024 bytes smem"
    );
    assert_eq!(coda_codegen::build::ptxas_summary(""), "ptxas reported no kernel");
}

/// A function the kernel calls has its properties listed after the
/// kernel's: they are not the kernel's spills.
#[test]
fn ptxas_summary_skips_the_properties_of_callees() {
    let stderr = "ptxas info    : Compiling entry function '_ZN7cutlass13device_kernelIN4coda6KernelEEEvNT_6ParamsE' for 'sm_90a'\n\
        ptxas info    : Function properties for _ZN7cutlass13device_kernelIN4coda6KernelEEEvNT_6ParamsE\n    \
        456 bytes stack frame, 460 bytes spill stores, 460 bytes spill loads\n\
        ptxas info    : Used 168 registers, used 2 barriers, 456 bytes cumulative stack size\n\
        ptxas info    : Compile time = 450.342 ms\n\
        ptxas info    : Function properties for _ZN4coda4math11sin_cos_farEf\n    \
        0 bytes stack frame, 12 bytes spill stores, 12 bytes spill loads\n";
    assert_eq!(
        coda_codegen::build::ptxas_summary(stderr),
        "168 registers, 456 bytes stack, 460 bytes spill stores, 460 bytes spill loads, 0 bytes smem"
    );
}

/// `install` returns at once where the stamp matches the pins, and never
/// deletes a folder that an install did not make.
#[test]
fn install_is_idempotent_and_leaves_foreign_folders_alone() {
    let dir = scratch("install");
    let done = dir.join("done");
    fake_toolkit(&done.join("nvidia/cu13"), "13.0");
    write(&done.join(".coda-pins"), &(coda_codegen::toolchain::pins().join(" ") + "\n"));
    assert_eq!(coda_codegen::toolchain::install(Some(&done)).unwrap(), done);
    let foreign = dir.join("foreign");
    write(&foreign.join("notes.txt"), "mine");
    let err = coda_codegen::toolchain::install(Some(&foreign)).unwrap_err();
    assert!(err.contains("not empty"), "{err}");
    assert!(foreign.join("notes.txt").is_file());
}

/// An install that did not finish (its marker, no stamp) is reported as such
/// where builds look, not used half-installed.
#[test]
fn an_interrupted_install_is_reported_not_used() {
    let dir = scratch("interrupted");
    let installed = dir.join("coda-rs/toolchain").join(coda_codegen::toolchain::pin_id());
    fake_toolkit(&installed.join("nvidia/cu13"), "13.0");
    fake_cutlass(&installed.join("cutlass_library/source"));
    write(&installed.join(".coda-installing"), "");
    let err = Toolchain::find_with(None, None, env(&[("XDG_CACHE_HOME", &dir)])).unwrap_err();
    assert!(err.contains("did not finish") && err.contains("bash scripts/install-toolchain.sh"), "{err}");
    write(&installed.join(".coda-pins"), &(coda_codegen::toolchain::pins().join(" ") + "\n"));
    std::fs::remove_file(installed.join(".coda-installing")).unwrap();
    Toolchain::find_with(None, None, env(&[("XDG_CACHE_HOME", &dir)])).unwrap();
}

/// The host compiler names the objects, not the kernels: its `--version`
/// text changes the object fingerprint, and a compiler that cannot run is
/// named by why, not a failed build. The fake compilers are links to
/// `echo` and `true` (a script written here could hit ETXTBSY when another
/// test thread forks while it is open).
#[test]
fn the_host_compiler_reaches_the_objects_names() {
    let dir = scratch("host");
    let link = |name: &str, to: &str| {
        let path = dir.join(name);
        let _ = std::fs::remove_file(&path);
        std::os::unix::fs::symlink(to, &path).unwrap();
        path
    };
    let no_env = |_: &str| None;
    let command = |ccbin: &Path| vec![OsString::from("nvcc"), OsString::from(format!("-ccbin={}", ccbin.display())), OsString::from("-O3")];
    // What each prints for `--version` run directly (GNU's name and version).
    let direct = |p: &str| String::from_utf8(std::process::Command::new(p).arg("--version").env("LC_ALL", "C").output().unwrap().stdout).unwrap();
    let cxx = link("c++", "/bin/echo");
    let before = cache::host_compiler(&cxx.clone().into_os_string());
    assert_eq!(before, format!("{}\n{}", cxx.display(), direct("/bin/echo")));
    assert_eq!(before, cache::host_compiler(&cxx.clone().into_os_string()));
    // The same path, another compiler behind it (an upgrade in place).
    link("c++", "/bin/true");
    let after = cache::host_compiler(&cxx.clone().into_os_string());
    assert_eq!(after, format!("{}\n{}", cxx.display(), direct("/bin/true")));
    assert_ne!(before, after);
    // The build's rebuild rule names the file behind the link, and a bare name is found on PATH.
    assert_eq!(cache::resolve_program(&cxx.clone().into_os_string(), no_env), std::fs::canonicalize("/bin/true").ok());
    let on_path = |k: &str| (k == "PATH").then(|| dir.clone().into_os_string());
    assert_eq!(cache::resolve_program(&"c++".into(), on_path), std::fs::canonicalize("/bin/true").ok());
    assert_eq!(cache::resolve_program(&"absent".into(), on_path), None);
    assert_ne!(cache::object_fingerprint("f", &before), cache::object_fingerprint("f", &after));
    assert_ne!(cache::object_fingerprint("f", &after), cache::object_fingerprint("g", &after));
    // Without `-ccbin`, `NVCC_CCBIN`; a compiler that is missing is named by the error.
    let plain = [OsString::from("nvcc")];
    let from_env = cache::host_compiler_program(&plain, |k| (k == "NVCC_CCBIN").then(|| cxx.clone().into_os_string()));
    assert_eq!(cache::host_compiler(&from_env), after);
    assert_eq!(cache::host_compiler_program(&command(&cxx), no_env), cxx.clone().into_os_string());
    assert_eq!(cache::host_compiler_program(&plain, no_env), OsString::from("gcc"), "nvcc's default");
    let missing = cache::host_compiler(&dir.join("absent").into_os_string());
    assert!(missing.contains("could not run"), "{missing}");
}
