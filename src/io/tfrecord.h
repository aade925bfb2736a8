#pragma once
// TFRecord framing, the container of TensorBoard's event files. Each record
// is
//
//   uint64 length (little-endian)
//   uint32 masked CRC-32C of those 8 length bytes
//   length bytes of data
//   uint32 masked CRC-32C of the data
//
// CRC-32C is the Castagnoli polynomial (reflected 0x82F63B78), as in iSCSI
// and ext4. The mask, ((crc >> 15) | (crc << 17)) + 0xa282ead8, is there
// because a CRC over data that itself holds CRCs is weak; readers undo it.
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace lt::io {

uint32_t crc32c(std::string_view bytes);
uint32_t masked_crc32c(std::string_view bytes);

// One record: the header, the data and its CRC.
std::string tfrecord_frame(std::string_view data);

// The records' data of a whole file, checking both CRCs of each. A file cut
// inside its last record (a writer killed mid-write) yields the complete
// records before it; a CRC mismatch throws naming `what` and the record.
std::vector<std::string> read_tfrecords(std::string_view file_bytes, const std::string& what);

}  // namespace lt::io
