import io
import os

from conan import ConanFile
from conan.errors import ConanException
from conan.tools.build import can_run
from conan.tools.cmake import CMake, CMakeDeps, CMakeToolchain, cmake_layout


class TestPackageConan(ConanFile):
    settings = "os", "arch", "compiler", "build_type"
    generators = "VirtualRunEnv"
    test_type = "explicit"

    def requirements(self):
        self.requires(self.tested_reference_str)

    def layout(self):
        cmake_layout(self)

    def generate(self):
        tc = CMakeToolchain(self)
        # As in the recipe: a CUDA LibTorch's config checks nvcc with the toolchain's C++ standard, which CMake
        # 3.25 (Debian 12's) cannot pass to nvcc as C++20.
        tc.variables["CMAKE_CUDA_STANDARD"] = "17"
        tc.generate()
        CMakeDeps(self).generate()

    def build(self):
        cmake = CMake(self)
        cmake.configure()
        cmake.build()

    def test(self):
        if not can_run(self):
            return
        # One step of the tiny Llama on synthetic tokens, on the CPU: seconds, and the whole path from the
        # run config through forward, backward and the optimizer step.
        binary = os.path.join(self.cpp.build.bindir, "test_package")
        output = io.StringIO()
        self.run(f"{binary} max_steps=1 batch_size=1 seq_len=16 threads=1 device=cpu", env="conanrun", stdout=output)
        self.output.info(output.getvalue())
        if not any(line.startswith("[done]") for line in output.getvalue().splitlines()):
            raise ConanException("test_package ran, but printed no '[done]' line: the training step did not finish")
