# Locate nvcc before enable_language(CUDA) when the user named none (CMAKE_CUDA_COMPILER / CUDACXX):
# $CUDA_HOME/bin, $CUDA_PATH/bin, PATH, /usr/local/cuda/bin, and the PyPI packages
# nvidia-cuda-nvcc / nvidia-cuda-runtime / nvidia-cuda-cccl (site-packages/nvidia/cu13).
# Sets CMAKE_CUDA_COMPILER and CUDAToolkit_ROOT when found.
if(CMAKE_CUDA_COMPILER OR DEFINED ENV{CUDACXX})
  return()
endif()

set(_fastglu_nvcc_hints "")
foreach(_var CUDA_HOME CUDA_PATH)
  if(DEFINED ENV{${_var}})
    list(APPEND _fastglu_nvcc_hints "$ENV{${_var}}/bin")
  endif()
endforeach()
list(APPEND _fastglu_nvcc_hints /usr/local/cuda/bin)

# site-packages of the interpreters that may hold the PyPI CUDA compiler packages.
set(_fastglu_pythons "")
if(Python_EXECUTABLE)
  list(APPEND _fastglu_pythons "${Python_EXECUTABLE}")
endif()
find_program(_fastglu_python3 NAMES python3 python)
if(_fastglu_python3)
  list(APPEND _fastglu_pythons "${_fastglu_python3}")
endif()
foreach(_py IN LISTS _fastglu_pythons)
  execute_process(
    COMMAND "${_py}" -c "import site,sys; print(';'.join(site.getsitepackages()+[site.getusersitepackages()]))"
    OUTPUT_VARIABLE _sites OUTPUT_STRIP_TRAILING_WHITESPACE ERROR_QUIET)
  foreach(_site IN LISTS _sites)
    list(APPEND _fastglu_nvcc_hints "${_site}/nvidia/cu13/bin")
  endforeach()
endforeach()

find_program(FASTGLU_NVCC nvcc HINTS ${_fastglu_nvcc_hints})
if(FASTGLU_NVCC)
  set(CMAKE_CUDA_COMPILER "${FASTGLU_NVCC}" CACHE FILEPATH "CUDA compiler")
  get_filename_component(_root "${FASTGLU_NVCC}" DIRECTORY)
  get_filename_component(_root "${_root}" DIRECTORY)
  if(NOT CUDAToolkit_ROOT)
    set(CUDAToolkit_ROOT "${_root}")
  endif()
endif()
