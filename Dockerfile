# lazytrain for GPU servers: the Debian package is built in NVIDIA's CUDA 13
# devel image and installed into the matching runtime image (cuDNN in both).
# Not built in CI (no Docker there); a ctest test checks that what it
# copies exists and configures. README, "Docker".
#
#   docker build -t lazytrain .
#   docker run --rm --gpus all lazytrain info
#   docker run --rm --gpus all -v "$PWD:/work" lazytrain train run.yaml
ARG CUDA_IMAGE_VERSION=13.0.1-cudnn

FROM nvidia/cuda:${CUDA_IMAGE_VERSION}-devel-ubuntu24.04 AS build
# GPU architectures to compile for (90: H100/H200).
ARG CUDA_ARCHITECTURES=90
WORKDIR /src
COPY scripts/install-deps.sh scripts/
# The fusion compiler (src/compile, issue 24) is a plugin the program loads
# only when train.compile asks for it, and on a GPU it is slower than the
# hand-written kernels for elementwise chains (train.compile auto keeps
# those there): leave MLIR (1.4 GB) out of the image. A run with
# train.compile on then needs its kernels' cubins in the cache folder
# (docs/compiler.md, "Kernels for a machine without MLIR").
RUN LT_MLIR=OFF ./scripts/install-deps.sh && apt-get install -y -qq --no-install-recommends dpkg-dev file
COPY CMakeLists.txt ./
COPY cmake cmake
COPY src src
COPY assets assets
RUN cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DLT_CUDA=ON -DLT_MLIR=OFF \
      -DCMAKE_CUDA_ARCHITECTURES=${CUDA_ARCHITECTURES} -DLT_BUILD_TESTS=OFF -DLT_BUILD_BENCH=OFF \
 && cmake --build build --target lazytrain \
 && cd build && cpack -G DEB

FROM nvidia/cuda:${CUDA_IMAGE_VERSION}-runtime-ubuntu24.04
COPY --from=build /src/build/lazytrain_*.deb /tmp/
RUN apt-get update -qq \
 && apt-get install -y -qq --no-install-recommends /tmp/lazytrain_*.deb \
 && rm -rf /var/lib/apt/lists/* /tmp/lazytrain_*.deb
WORKDIR /work
ENTRYPOINT ["lazytrain"]
CMD ["info"]
