# @brief Finds RocksDB by header and library. Debian's RocksDBConfig.cmake breaks when relocated
# (its Snappy targets point at absent files), so a plain find works on both the CI and the GPU machine.
find_path(RocksDB_INCLUDE_DIR rocksdb/db.h)
find_library(RocksDB_LIBRARY NAMES rocksdb)
include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(RocksDB REQUIRED_VARS RocksDB_LIBRARY RocksDB_INCLUDE_DIR)
if(RocksDB_FOUND AND NOT TARGET RocksDB::rocksdb)
  add_library(RocksDB::rocksdb UNKNOWN IMPORTED)
  set_target_properties(RocksDB::rocksdb PROPERTIES
    IMPORTED_LOCATION "${RocksDB_LIBRARY}"
    INTERFACE_INCLUDE_DIRECTORIES "${RocksDB_INCLUDE_DIR}")
endif()
mark_as_advanced(RocksDB_INCLUDE_DIR RocksDB_LIBRARY)
