# tessera's image decoding (io/image_file.hpp: libjpeg-turbo, libpng) against Pillow 13 (tests/reference/
# check_images.py), byte for byte: ~330 JPEGs and PNGs made there (every PNG colour type and bit depth, Adam7, Pillow's
# JPEG qualities, subsamplings, progressive, grayscale, CMYK; YCCK, arithmetic coding and odd samplings written by
# jpeg_write with libjpeg's encoder; sizes 1x1 to 640x480) and damaged ones (cut short at many points, flipped
# entropy bytes, CRC errors), where Pillow's refusals must be tessera's too. image_decode_dump is tessera's side.
add_executable(image_decode_dump io/image_decode_dump.cpp)
target_link_libraries(image_decode_dump PRIVATE tessera::tessera)
add_executable(jpeg_write io/jpeg_write.cpp)
target_link_libraries(jpeg_write PRIVATE JPEG::JPEG)

set(_check_images ${TESSERA_PYTHON} "${CMAKE_CURRENT_SOURCE_DIR}/reference/check_images.py"
    $<TARGET_FILE:image_decode_dump> $<TARGET_FILE:jpeg_write>)
tessera_reference_case(reference.images_pillow COMMAND ${_check_images})
# Negative control: one expected byte changed must be reported.
tessera_reference_case(reference.images_pillow_negative_control COMMAND ${_check_images} --perturb --expect-mismatch)
