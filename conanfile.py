import os
import re
import subprocess

from conan import ConanFile
from conan.errors import ConanException, ConanInvalidConfiguration
from conan.tools.build import check_min_cppstd, cross_building
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain
from conan.tools.files import load, save

required_conan_version = ">=2.0"

# The torch wheel's version and CUDA version, read from torch/version.py: importing torch would take seconds.
_TORCH_QUERY = (
    "import importlib.util, os, runpy; "
    "v = runpy.run_path(os.path.join(os.path.dirname(importlib.util.find_spec('torch').origin), 'version.py')); "
    "print(v['__version__']); print(v.get('cuda') or '')"
)


class TesseraConan(ConanFile):
    name = "tessera"
    # The repository has no license file yet: SPDX's "no assertion" until it does.
    license = "NOASSERTION"
    description = "Policy-based C++20 templates for training large models on LibTorch"
    topics = ("deep-learning", "llm", "training", "libtorch", "fsdp", "zero", "mixed-precision", "header-mostly")
    package_type = "static-library"
    settings = "os", "arch", "compiler", "build_type"
    # Each maps onto tessera's CMake build:
    #   with_mpi  tessera/dist (World, MpiCommunicator): find_package(MPI) required, or disabled
    #   with_cuda TESSERA_CUDA: Adam8bit's CUDA kernel and CUDA memory statistics (needs a CUDA LibTorch)
    #   with_nccl TESSERA_WITH_NCCL: NcclCommunicator (needs with_cuda and with_mpi, and NCCL's headers and library)
    #   with_arrow TESSERA_ARROW: datasets directories and Parquet files as data= (Apache Arrow C++ and Parquet from
    #             the pyarrow wheel of user.tessera:torch_python, as LibTorch comes from its torch wheel)
    # LibTorch, MPI, Boost, nlohmann-json, SentencePiece and NCCL are no Conan requirements (none is on a Conan
    # remote in a form tessera can use), nor are libjpeg-turbo and libpng (ConanCenter has them, but the package is
    # made offline, and the image pixels are checked against Pillow with the system's libjpeg-turbo; IJG's libjpeg
    # does not compile: src/io/image_jpeg.cpp): LibTorch is the torch wheel of a Python environment, the conf
    # user.tessera:torch_python, as for tessera's own build; the others are the system's (Debian: libopenmpi-dev,
    # libboost-dev, nlohmann-json3-dev, libsentencepiece-dev, libjpeg62-turbo-dev, libpng-dev) or, for NCCL and the
    # CUDA toolkit, that Python environment's nvidia-* wheels.
    options = {
        "with_mpi": [True, False],
        "with_cuda": [True, False],
        "with_nccl": [True, False],
        "with_arrow": [True, False],
    }
    default_options = {
        "with_mpi": True,
        "with_cuda": True,
        "with_nccl": True,
        "with_arrow": True,
    }
    exports_sources = "CMakeLists.txt", "cmake/*", "include/*", "src/*", "conan/*"

    def set_version(self):
        # One version, the one CMake's project() declares.
        text = load(self, os.path.join(self.recipe_folder, "CMakeLists.txt"))
        self.version = re.search(r"project\(tessera VERSION ([0-9.]+)", text).group(1)

    def configure(self):
        if not self.options.with_cuda or not self.options.with_mpi:
            # NCCL needs both: CUDA tensors, and MPI to send NCCL's unique id.
            self.options.rm_safe("with_nccl")

    def layout(self):
        # tessera's own layout: the sources at the top, one build folder "build" below them (not cmake_layout's
        # build/Release), so that the package's compilations name the sources by the same paths relative to their
        # build folder as a build of the checkout does (ccache's base_dir: a package built where the checkout was built
        # before hits its cache).
        self.folders.source = "."
        self.folders.build = "build"
        self.folders.generators = os.path.join("build", "generators")

    def validate(self):
        check_min_cppstd(self, 20)
        if self.settings.os != "Linux":
            raise ConanInvalidConfiguration(f"{self.ref} is built and tested on Linux only")

    def validate_build(self):
        python = self._torch_python
        if not python:
            raise ConanInvalidConfiguration(
                f"{self.ref} builds against the LibTorch of a Python environment with torch: give its Python with "
                "-c user.tessera:torch_python=/path/to/bin/python (tessera's own: .venv/bin/python, made by "
                "scripts/install-deps.sh)")
        if self.options.with_cuda and not self._torch[1]:
            raise ConanInvalidConfiguration(
                f"{self.ref}:with_cuda=True needs a CUDA LibTorch, but torch {self._torch[0]} of {python} has no "
                "CUDA: build with -o 'tessera/*:with_cuda=False'")

    @property
    def _torch_python(self):
        return self.conf.get("user.tessera:torch_python", check_type=str)

    @property
    def _torch(self):
        """(version, CUDA version or "") of the torch wheel that user.tessera:torch_python imports."""
        if not hasattr(self, "_torch_cached"):
            query = subprocess.run([self._torch_python, "-c", _TORCH_QUERY], capture_output=True, text=True)
            if query.returncode != 0:
                raise ConanException(f"user.tessera:torch_python={self._torch_python} cannot find torch:\n"
                                     f"{query.stderr}Point it at a Python environment with torch (tessera's own: "
                                     ".venv/bin/python, made by scripts/install-deps.sh)")
            version, cuda = (query.stdout.splitlines() + ["", ""])[:2]
            self._torch_cached = (version.strip(), cuda.strip())
        return self._torch_cached

    def package_id(self):
        # The binary is built against that LibTorch: another torch version or CUDA version is another binary.
        if self._torch_python:
            version, cuda = self._torch
            self.info.conf.define("user.tessera:torch", f"{version} cuda {cuda or 'none'}")

    def generate(self):
        tc = CMakeToolchain(self)
        if not cross_building(self):
            # -m64 (or -m32) for the arch the compiler builds for anyway: it changes no code, only the command line,
            # which would then differ from a build of the checkout and miss its ccache entries.
            tc.blocks.remove("arch_flags")
        # The toolchain's C++20 reaches the CUDA compiler checks that a CUDA LibTorch's config runs (they take
        # CUDA's standard from C++'s), and Debian 12's CMake 3.25 has no C++20 flag for nvcc; tessera's CUDA is C++17.
        tc.variables["CMAKE_CUDA_STANDARD"] = "17"
        tc.cache_variables["TESSERA_TORCH_PYTHON"] = self._torch_python
        # The package is the library and its CMake files: no tests, examples or benchmarks to compile.
        tc.cache_variables["TESSERA_BUILD_TESTS"] = False
        tc.cache_variables["TESSERA_BUILD_EXAMPLES"] = False
        tc.cache_variables["TESSERA_BUILD_BENCH"] = False
        tc.cache_variables["TESSERA_INSTALL"] = True
        tc.cache_variables["TESSERA_CUDA"] = bool(self.options.with_cuda)
        tc.cache_variables["TESSERA_ARROW"] = bool(self.options.with_arrow)
        tc.cache_variables["TESSERA_WITH_NCCL"] = "ON" if self.options.get_safe("with_nccl") else "OFF"
        # tessera finds MPI when it is there; the option makes that a requirement, or keeps MPI out.
        if self.options.with_mpi:
            tc.cache_variables["CMAKE_REQUIRE_FIND_PACKAGE_MPI"] = True
        else:
            tc.cache_variables["CMAKE_DISABLE_FIND_PACKAGE_MPI"] = True
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def package(self):
        cmake = CMake(self)
        cmake.install()
        # CMakeDeps writes the consumers' tessera-config.cmake from package_info(); the installed config and its
        # exported targets go, the helpers it shares with the build module below stay.
        module_dir = os.path.join(self.package_folder, "lib", "cmake", "tessera")
        for name in ("tesseraConfig.cmake", "tesseraConfigVersion.cmake"):
            os.remove(os.path.join(module_dir, name))
        for name in os.listdir(module_dir):
            if name.startswith("tesseraTargets"):
                os.remove(os.path.join(module_dir, name))
        template = load(self, os.path.join(self.source_folder, "conan", "tessera-system-dependencies.cmake.in"))
        values = {
            "TESSERA_TORCH_PYTHON": self._torch_python,
            "TESSERA_WITH_MPI": "ON" if self.options.with_mpi else "OFF",
            "TESSERA_WITH_CUDA": "ON" if self.options.with_cuda else "OFF",
            "TESSERA_WITH_NCCL": "ON" if self.options.get_safe("with_nccl") else "OFF",
            "TESSERA_WITH_ARROW": "ON" if self.options.with_arrow else "OFF",
        }
        for key, value in values.items():
            template = template.replace(f"@{key}@", value)
        save(self, os.path.join(module_dir, "tessera-system-dependencies.cmake"), template)

    def package_info(self):
        self.cpp_info.set_property("cmake_file_name", "tessera")
        self.cpp_info.set_property("cmake_target_name", "tessera::tessera")
        self.cpp_info.libs = ["tessera"]
        self.cpp_info.includedirs = ["include"]
        if self.options.with_mpi:
            self.cpp_info.defines.append("TESSERA_WITH_MPI")
        if self.options.get_safe("with_nccl"):
            self.cpp_info.defines.append("TESSERA_WITH_NCCL")
        if self.settings.os == "Linux":
            self.cpp_info.system_libs = ["pthread", "m", "dl"]
        # LibTorch, MPI, NCCL, Boost, nlohmann-json, libsentencepiece, libjpeg-turbo and libpng come from the system,
        # not from Conan: this module finds them (as tessera's own installed package does) and links them to
        # tessera::tessera, and defines tessera_add_experiment().
        module_dir = os.path.join("lib", "cmake", "tessera")
        self.cpp_info.builddirs = [module_dir]
        self.cpp_info.set_property("cmake_build_modules",
                                   [os.path.join(module_dir, "tessera-system-dependencies.cmake")])
